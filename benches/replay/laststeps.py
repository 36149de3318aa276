import json,sys,urllib.request
last=json.loads(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/__last").read())
def llm(c, expect):
    h=[["content-type", c["content_type"] or "application/json"]]
    if c.get("authorization"): h.append(["authorization", c["authorization"]])
    return {"method":"POST","path":c["uri"],"headers":h,"body":c["body"],"expect_status":200,"expect":[expect]}
t=last["tool"]
tool={"method":t["method"],"path":t["uri"],"headers":[["x-bench-upstream","tool"]],"body":t["body"],"expect_status":200,"expect":["OBS7F3A9"]}
json.dump([llm(last["llm_first"],"get_weather"),tool,llm(last["llm_final"],"It is sunny")],open(sys.argv[2],'w'))
print(len(last["llm_first"]["body"]), len(last["llm_final"]["body"]))

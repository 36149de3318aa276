import copy, json, sys
src, dst = sys.argv[1:3]  # the many-tools Envoy config, the config to write with a plain listener added
c=json.load(open(src))
ls=c['static_resources']['listeners']
p=copy.deepcopy(ls[0]); p['name']='plain'
p['address']['socket_address']['port_value']=int(str(ls[0]['address']['socket_address']['port_value'])[:4]+'4')
hcm=p['filter_chains'][0]['filters'][0]['typed_config']; hcm['stat_prefix']='plain'
hcm['http_filters']=[f for f in hcm['http_filters'] if 'router' in f['name']]
ls.append(p); json.dump(c,open(dst,'w'))

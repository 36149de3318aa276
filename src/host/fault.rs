//! What a panic inside a host callback leads to, by where the stream is, as Envoy's own Rust SDK
//! does: while no response has begun the client gets a 500; once it has, the stream is reset (a
//! status can no longer be sent, and a half-written answer must not pass for a whole one). One log
//! line says where and what was done, never what the panic carried (a body or a secret may be in it).

/// Where the stream is when a callback panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// No response has begun: the upstream's head is not held and none was started by the filter.
    Request,
    /// The response has begun (its head held, or sent).
    Response,
}

/// What the host does with the stream after a panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// A local reply: 500, an OpenAI-style error.
    Answer500,
    /// The stream is reset.
    Reset,
}

impl Path {
    /// `response_begun`: a response hook ran, or the filter started the response itself.
    pub fn of(response_begun: bool) -> Path {
        if response_begun {
            Path::Response
        } else {
            Path::Request
        }
    }
}

pub fn fate(path: Path) -> Fate {
    match path {
        Path::Request => Fate::Answer500,
        Path::Response => Fate::Reset,
    }
}

/// The 500's body.
pub fn body() -> Vec<u8> {
    crate::openai::answer::error("internal error in the api-agent filter", "api_error", "internal_error")
        .to_string()
        .into_bytes()
}

/// The one log line of a panic: where it happened (`file:line`) and what became of the stream
/// (`None`: no stream, e.g. on the main thread).
pub fn line(location: &str, fate: Option<Fate>) -> String {
    let done = match fate {
        Some(Fate::Answer500) => "; the request was answered 500 and the stream is left alone",
        Some(Fate::Reset) => "; the response had begun: the stream was reset",
        None => "",
    };
    format!("api-agent panicked at {location}{done}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_answers_500_before_the_response_and_resets_after() {
        assert_eq!(fate(Path::of(false)), Fate::Answer500);
        assert_eq!(fate(Path::of(true)), Fate::Reset);
        let body = String::from_utf8(body()).unwrap_or_default();
        assert!(body.contains("internal_error"), "{body}");
        let l = line("src/agent/machine.rs:10", Some(Fate::Reset));
        assert!(l.contains("machine.rs:10") && l.contains("reset"), "{l}");
    }
}

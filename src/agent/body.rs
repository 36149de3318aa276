//! `Body`, in a file of its own: `protocol` names it, so it must name nothing of the agent's.

use std::rc::Rc;

/// A callout's body, shared rather than copied: an LLM turn's call is kept for a retry while the host
/// sends it (with a large catalog the body is ~80 KB, and copying it was a third of what the catalog
/// cost a request).
#[derive(Clone, PartialEq, Eq)]
pub struct Body(Rc<Vec<u8>>);

impl From<Vec<u8>> for Body {
    fn from(bytes: Vec<u8>) -> Body {
        Body(Rc::new(bytes))
    }
}

impl std::ops::Deref for Body {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

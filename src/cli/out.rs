//! Output that never panics: `println!` panics when stdout is a closed pipe (`api-agent tools | head`);
//! here a reader that went away just ends the output.

use std::io::Write;

/// One line on standard output.
pub fn line(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
}

/// Bytes on standard output, exactly as given.
pub fn bytes(data: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(data);
    let _ = out.flush();
}

/// One line on standard error.
pub fn error_line(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

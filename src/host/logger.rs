//! `log` records to the host's log, with every configured secret masked, at every level: one logger
//! for both shims, which only say how a line reaches their host (the ABI's log call) and read their
//! host's level.

use std::sync::RwLock;

/// The `log` logger over a host's log call, which takes the record's level as both ABIs number it
/// (`level_code`) and the line.
pub struct Logger(pub fn(u32, &str));

/// Secrets of every configuration loaded so far (a VM or a process may hold several): masking one of
/// a replaced configuration costs nothing.
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Installs `logger`, at `info` until the host's level is read (`filter_of`).
pub fn install(logger: &'static Logger) {
    let _ = log::set_logger(logger);
    log::set_max_level(log::LevelFilter::Info);
}

pub fn add_secrets(mut more: Vec<String>) {
    if let Ok(mut secrets) = SECRETS.write() {
        secrets.append(&mut more);
        crate::config::sort_secrets(&mut secrets);
    }
}

/// A record's level as Proxy-Wasm and the dynamic-module ABI both number it (trace 0 … error 4).
pub fn level_code(level: log::Level) -> u32 {
    match level {
        log::Level::Trace => 0,
        log::Level::Debug => 1,
        log::Level::Info => 2,
        log::Level::Warn => 3,
        log::Level::Error => 4,
    }
}

/// The filter for a host whose lowest enabled level is `code` (`level_code`'s numbers; above warn:
/// errors only), so that records below it are not even formatted.
pub fn filter_of(code: u32) -> log::LevelFilter {
    match code {
        0 => log::LevelFilter::Trace,
        1 => log::LevelFilter::Debug,
        2 => log::LevelFilter::Info,
        3 => log::LevelFilter::Warn,
        _ => log::LevelFilter::Error,
    }
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = level_code(record.level());
        let text = record.args().to_string();
        // `try_read`: a line logged while the secrets are being replaced is dropped, not a deadlock.
        match SECRETS.try_read() {
            Ok(secrets) => (self.0)(level, &crate::redact::redact(&text, &secrets)),
            Err(_) => (self.0)(level, "api-agent: a log line was dropped (secrets being replaced)"),
        }
    }

    fn flush(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use log::Log;
    use std::sync::Mutex;

    static LINES: Mutex<Vec<(u32, String)>> = Mutex::new(Vec::new());

    fn write(level: u32, text: &str) {
        if let Ok(mut l) = LINES.lock() {
            l.push((level, text.to_string()));
        }
    }

    #[test]
    fn lines_are_masked_and_numbered_as_the_abis_number_them() {
        add_secrets(vec!["sk-logger-test-secret".into()]);
        let logger = Logger(write);
        log::set_max_level(log::LevelFilter::Trace);
        logger.log(
            &log::Record::builder().level(log::Level::Warn).args(format_args!("key sk-logger-test-secret")).build(),
        );
        let lines = LINES.lock().map(|l| l.clone()).unwrap_or_default();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].0, 3);
        assert!(!lines[0].1.contains("sk-logger-test-secret"), "{}", lines[0].1);
        assert_eq!(filter_of(0), log::LevelFilter::Trace);
        assert_eq!(filter_of(9), log::LevelFilter::Error);
    }
}

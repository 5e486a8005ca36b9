//! Messages on stderr: errors and warnings always, progress with `--v=2` and more. Every line
//! goes through a redactor that knows the secrets of this invocation (service-account token,
//! ECR token and password, assumed-role keys), so none of them can reach stderr even inside
//! an error text from a library.

use std::io::Write;

use crate::secret::Secret;

/// Secrets shorter than this are not searched for (they would match ordinary words).
const MIN_SECRET_LEN: usize = 6;
const REDACTED: &str = "<redacted>";

/// The stderr logger of one invocation.
pub struct Log {
    verbosity: u8,
    secrets: Vec<String>,
    out: Box<dyn Write>,
}

impl Log {
    /// Logs to `out` (stderr in the binary) at `verbosity` (`--v`).
    pub fn new(verbosity: u8, out: Box<dyn Write>) -> Log {
        Log {
            verbosity,
            secrets: Vec::new(),
            out,
        }
    }

    /// Remembers a secret so it is redacted from every later line.
    pub fn add_secret(&mut self, secret: &Secret) {
        self.add_secret_str(secret.expose());
    }

    /// Remembers a secret given as text so it is redacted from every later line.
    pub fn add_secret_str(&mut self, secret: &str) {
        if secret.len() >= MIN_SECRET_LEN && !self.secrets.iter().any(|s| s == secret) {
            self.secrets.push(secret.to_owned());
            // Longest first, so a secret containing another is replaced whole.
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    /// Whether `level` messages are written.
    pub fn enabled(&self, level: u8) -> bool {
        self.verbosity >= level
    }

    /// A progress message, written at `--v=level` and above.
    pub fn info(&mut self, level: u8, message: impl AsRef<str>) {
        if self.enabled(level) {
            self.line("", message.as_ref());
        }
    }

    /// Something went wrong but the answer is still good (always written).
    pub fn warn(&mut self, message: impl AsRef<str>) {
        self.line("warning: ", message.as_ref());
    }

    /// The reason this invocation fails (always written).
    pub fn error(&mut self, message: impl AsRef<str>) {
        self.line("error: ", message.as_ref());
    }

    fn line(&mut self, prefix: &str, message: &str) {
        let text = self.redact(message);
        let _ = writeln!(self.out, "ecr-credential-provider: {prefix}{text}");
    }

    /// `text` with every known secret replaced.
    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }
}

/// A shared in-memory writer for tests: what was written, as text.
#[cfg(test)]
#[derive(Clone, Default)]
pub(crate) struct Buf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

#[cfg(test)]
impl std::io::Write for Buf {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
impl Buf {
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_from_every_line() {
        let buf = Buf::default();
        let mut log = Log::new(2, Box::new(buf.clone()));
        log.add_secret(&Secret::new("eyJhbGciOiJSUzI1NiJ9.payload.signature"));
        log.add_secret_str("QVdTOnBhc3N3b3Jk");
        log.add_secret_str("AWS"); // too short to search for
        log.error("sts said: token eyJhbGciOiJSUzI1NiJ9.payload.signature is bad");
        log.warn("token QVdTOnBhc3N3b3Jk twice QVdTOnBhc3N3b3Jk");
        log.info(2, "user AWS");
        assert_eq!(
            buf.text(),
            "ecr-credential-provider: error: sts said: token <redacted> is bad\n\
             ecr-credential-provider: warning: token <redacted> twice <redacted>\n\
             ecr-credential-provider: user AWS\n"
        );
    }

    #[test]
    fn a_longer_secret_containing_a_shorter_one_is_replaced_whole() {
        let buf = Buf::default();
        let mut log = Log::new(0, Box::new(buf.clone()));
        log.add_secret_str("secret");
        log.add_secret_str("secret-and-more");
        log.error("x secret-and-more y");
        assert_eq!(
            buf.text(),
            "ecr-credential-provider: error: x <redacted> y\n"
        );
    }

    #[test]
    fn verbosity_gates_progress_only() {
        let buf = Buf::default();
        let mut log = Log::new(0, Box::new(buf.clone()));
        log.info(1, "hidden");
        log.warn("shown");
        assert!(!log.enabled(1));
        assert_eq!(buf.text(), "ecr-credential-provider: warning: shown\n");
    }
}

//! What is wrong with a spec or a user's file, for the person who gave it: a [`UsageError`]
//! names the flag, scenario key or file line and what is allowed; the CLI exits 2 on it. The
//! builder ([`crate::spec`]) and the file reader ([`crate::files`]) both report these.

/// A spec (or a command line) that is well-formed but makes no sense: exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub(crate) fn usage<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// Every located error of a file, one `headroom: file:line:col: message` line each.
pub fn errors_to_usage(errs: Vec<headroom_scenario::ScenarioError>) -> UsageError {
    let lines: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    UsageError(lines.join("\nheadroom: "))
}

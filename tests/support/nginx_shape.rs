//! A structural check of a rendered nginx.conf, shared by the property tests
//! (tests/hermetic/properties.rs) and the fuzz target fuzz/fuzz_targets/nginx_render.rs
//! (which includes this file by path). Test-only, unprivileged, pure.
//!
//! The claim it checks: whatever validated server name and port went in, the
//! config holds exactly the statements `crate::nginx::render` writes, in the
//! same order, and the name and the port appear only as the one argument of
//! `server_name` and inside the one argument of `proxy_pass`. A name that
//! could open a block, end a statement or add an argument would change the
//! statement list and fail here.

/// One statement: its words and the token that ended it (`;`, `{` or `}`).
pub type Statement = Vec<String>;

/// Splits a config into statements the way nginx's tokenizer does for the
/// characters our template uses: whitespace separates words, `;` `{` `}`
/// end a statement, `#` at the start of a word runs to the end of the line.
/// Quotes, `\` and `$` are kept inside words: the template has only `$host`,
/// and a name that carried any of them would show up as a different word.
pub fn statements(config: &str) -> Vec<Statement> {
    let mut out = Vec::new();
    let mut current: Statement = Vec::new();
    let mut word = String::new();
    let mut chars = config.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '#' if word.is_empty() => {
                while chars.peek().is_some_and(|&n| n != '\n') {
                    chars.next();
                }
            }
            ';' | '{' | '}' => {
                if !word.is_empty() {
                    current.push(std::mem::take(&mut word));
                }
                current.push(c.to_string());
                out.push(std::mem::take(&mut current));
            }
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    current.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        current.push(word);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// `Ok` when `config` is the template's statements with `name` as the only
/// `server_name` argument and `http://app:<port>` as the only `proxy_pass`
/// argument; otherwise the first difference.
pub fn only_our_directives(config: &str, name: &str, port: u16) -> Result<(), String> {
    only_our_directives_for(config, &[name], port)
}

/// [`only_our_directives`] for a gateway that serves several names: they
/// are the `server_name` statement's arguments, in order, and nothing else.
pub fn only_our_directives_for(config: &str, names: &[&str], port: u16) -> Result<(), String> {
    // The reference: the same template rendered with a name and a port that
    // cannot be confused with anything else in it.
    let ours =
        statements(&volce_lab::nginx::render("reference.example", 1024, volce_lab::nginx::AccessLog::Off));
    let got = statements(config);
    if ours.len() != got.len() {
        return Err(format!("{} statements, the template has {}", got.len(), ours.len()));
    }
    for (reference, statement) in ours.iter().zip(&got) {
        let mut expected = reference.clone();
        match expected[0].as_str() {
            "server_name" => {
                let end = expected.split_off(1);
                expected.extend(names.iter().map(|n| n.to_string()));
                expected.extend(end.into_iter().skip(1));
            }
            "proxy_pass" => expected[1] = format!("http://{}:{port}", volce_lab::nginx::APP_ALIAS),
            _ => {}
        }
        if statement != &expected {
            return Err(format!("statement {statement:?} where the template has {expected:?}"));
        }
    }
    Ok(())
}

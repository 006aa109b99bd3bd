//! The files of `src/` import each other in no circle: `layers.rs` holds the
//! top-level modules to their order; this holds every production file to a
//! graph without a cycle, so each file keeps one interface that the files
//! it uses do not reach back into. A file naming its own module root (or
//! an ancestor) is not an edge: the root is the interface its files
//! implement parts of, as `exec/outcome.rs` names `super::Execution`.
//!
//! A reference is a `use` path or an inline `crate::`/`super::` path,
//! resolved to the longest module path that is a file. Unit-test files and
//! everything after a file's first `#[cfg(test)]` are not in the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every production file of `src/` by its module path (`actions/mod.rs`
/// is `["actions"]`, `lib.rs` is `[]`).
fn files(dir: &Path, out: &mut BTreeMap<Module, PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if path.is_dir() {
            if name != "tests" {
                files(&path, out);
            }
        } else if let Some(stem) = name.strip_suffix(".rs").filter(|s| *s != "tests") {
            let relative = path.strip_prefix(src()).unwrap().parent().unwrap();
            let mut module: Module = relative.iter().map(|c| c.to_str().unwrap().to_owned()).collect();
            if !matches!(stem, "mod" | "lib" | "main") {
                module.push(stem.to_owned());
            }
            out.insert(module, path);
        }
    }
}

/// The paths a file's code names: each `use` (one level of `{..}` spread)
/// and each inline `crate::`/`super::` path, as `::`-separated segments.
fn paths(code: &str) -> Vec<Vec<String>> {
    let segments = |path: &str| -> Vec<String> {
        path.split("::").map(|s| s.trim().split(' ').next().unwrap_or("").to_owned()).collect()
    };
    let mut found = Vec::new();
    for statement in code.split(';') {
        let word = |at: &usize| !statement[..*at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        let Some(at) = statement.match_indices("use ").map(|(at, _)| at).find(word) else { continue };
        let body: String = statement[at + 4..].split_whitespace().collect::<Vec<_>>().join(" ");
        match body.split_once("::{") {
            Some((prefix, group)) => {
                for item in group.trim_end_matches('}').split(',') {
                    let item = item.trim().split("::{").next().unwrap_or("");
                    found.push(segments(&format!("{prefix}::{item}")));
                }
            }
            None => found.push(segments(&body)),
        }
    }
    for start in ["crate::", "super::"] {
        for (at, _) in code.match_indices(start) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let path: String = code[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            // A path that ends in `::` opens a `use` group, read above.
            if !path.ends_with("::") {
                found.push(segments(&path));
            }
        }
    }
    found
}

/// What each module root re-exports from the files it registers:
/// (root, name) -> the file that defines it. `crate::vocab::Code` names
/// `vocab/refusal.rs`, not the facade `vocab/mod.rs` (each shared type has
/// one path, and its files stay private).
type Reexports = BTreeMap<(Module, String), Module>;

fn reexports(module: &Module, code: &str, modules: &BTreeMap<Module, PathBuf>) -> Reexports {
    let mut found = Reexports::new();
    for path in paths(&code.replace("pub use ", "use ")) {
        let Some(name) = path.last().filter(|n| n.chars().next().is_some_and(char::is_alphabetic)) else {
            continue;
        };
        let child = [module.as_slice(), &path[..1]].concat();
        if path.len() > 1 && modules.contains_key(&child) && code.contains(&format!("pub use {}", path[0])) {
            found.insert((module.clone(), name.clone()), child);
        }
    }
    found
}

/// The file a path names, seen from `from`, if it is another file.
fn target(from: &Module, path: &[String], modules: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    target_through(from, path, modules, &Reexports::new())
}

/// [`target`], following the re-exports of a module root to the file
/// that defines the name.
fn target_through(
    from: &Module,
    path: &[String],
    modules: &BTreeMap<Module, PathBuf>,
    reexports: &Reexports,
) -> Option<Module> {
    let child = |name: &str| [from.as_slice(), &[name.to_owned()]].concat();
    let mut full: Module = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super" | "self") => from.clone(),
        // `use deploy::Deploy` in a module's root: a file it registers.
        Some(name) if modules.contains_key(&child(name)) => from.clone(),
        _ => return None,
    };
    for segment in path {
        match segment.as_str() {
            "crate" | "self" | "*" | "" => {}
            "super" => {
                full.pop();
            }
            name => full.push(name.to_owned()),
        }
    }
    let n = (1..=full.len()).rev().find(|n| modules.contains_key(&full[..*n]))?;
    let mut found = full[..n].to_vec();
    if let Some(defined) = full.get(n).and_then(|name| reexports.get(&(found.clone(), name.clone()))) {
        found = defined.clone();
    }
    // A file's own module root is the interface it implements a part of
    // (a child naming `super::Execution` is no circle); a sibling, a child
    // and every other file count.
    (found != *from && !from.starts_with(&found)).then_some(found)
}

/// A cycle in `edges`, as the files along it, if there is one.
fn cycle(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn visit(
        node: &Module,
        edges: &BTreeMap<Module, BTreeSet<Module>>,
        path: &mut Vec<Module>,
        done: &mut BTreeSet<Module>,
    ) -> Option<Vec<Module>> {
        if let Some(at) = path.iter().position(|m| m == node) {
            return Some(path[at..].to_vec());
        }
        if !done.insert(node.clone()) {
            return None;
        }
        path.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|start| visit(start, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_files_of_src_import_each_other_in_a_circle() {
    let mut modules = BTreeMap::new();
    files(&src(), &mut modules);
    let code: BTreeMap<&Module, String> = modules
        .iter()
        .map(|(module, file)| {
            let text = std::fs::read_to_string(file).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            (module, code.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n"))
        })
        .collect();
    let reexports: Reexports =
        code.iter().flat_map(|(module, code)| reexports(module, code, &modules)).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, code) in &code {
        let to = paths(code).iter().filter_map(|p| target_through(module, p, &modules, &reexports)).collect();
        edges.insert((*module).clone(), to);
    }
    assert!(edges.values().map(BTreeSet::len).sum::<usize>() > 300, "the reader finds the imports");
    if let Some(found) = cycle(&edges) {
        let names: Vec<String> = found.iter().map(|m| m.join("/")).collect();
        panic!("these files import each other in a circle: {}", names.join(" -> "));
    }
}

/// Tried: a file naming its root is no edge; naming a sibling or a child
/// is; two files naming each other are a circle, a chain is not.
#[test]
fn a_file_importing_its_own_root_is_found() {
    let module = |s: &str| -> Module { s.split('/').map(str::to_owned).collect() };
    let mut modules = BTreeMap::new();
    for m in ["a", "a/b", "a/c"] {
        modules.insert(module(m), PathBuf::new());
    }
    let root = module("a");
    let child = module("a/b");
    let to_child = target(&root, &["self".into(), "b".into(), "B".into()], &modules);
    assert_eq!(to_child, Some(child.clone()));
    assert_eq!(target(&root, &["b".into(), "B".into()], &modules), Some(child.clone()));
    assert_eq!(target(&root, &["serde".into(), "Serialize".into()], &modules), None);
    let to_root = target(&child, &["super".into(), "Trait".into()], &modules);
    assert_eq!(to_root, None, "a file's own root is the interface it implements");
    let to_sibling = target(&child, &["super".into(), "c".into(), "Trait".into()], &modules);
    assert_eq!(to_sibling, Some(module("a/c")));
    let edges = BTreeMap::from([
        (root.clone(), BTreeSet::from([child.clone()])),
        (child.clone(), BTreeSet::from([root])),
    ]);
    assert!(cycle(&edges).is_some());
    let edges = BTreeMap::from([(child, BTreeSet::from([module("a/c")]))]);
    assert!(cycle(&edges).is_none());
}

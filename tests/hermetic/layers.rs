//! The layers of `src/`, checked like code: every `crate::<module>`
//! reference on a code line of `src/**/*.rs` is an edge between two
//! top-level modules, and the edges must follow [`LAYERS`], the one table of
//! the modules in the order of `src/lib.rs`'s layout map (top first).
//!
//! Rules: a module refers only to modules below it in the table; the pure
//! core and the shared leaf have their own, stricter lists (`control` never
//! reaches the I/O layers, `docker` never the decision logic, `store` never
//! Docker, `vocab` nothing but `text`); and the top-level modules have no
//! import cycle. A failure names the file and line of each offending
//! reference. Reads files only; no privilege.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One top-level module: its name, and what it must never refer to
/// beyond the order of the table (`only`, when given, is the whole list of
/// what it may refer to).
struct Layer {
    module: &'static str,
    never: &'static [&'static str],
    only: Option<&'static [&'static str]>,
}

const fn layer(module: &'static str) -> Layer {
    Layer { module, never: &[], only: None }
}

/// The modules of `src/`, top first, as `src/lib.rs`'s layout map lists
/// them (tested): a module may refer to the modules below it, never above.
const LAYERS: &[Layer] = &[
    layer("cli"),
    layer("mcp"),
    layer("install"),
    layer("host"),
    layer("inspect"),
    Layer { module: "store", never: &["docker"], only: None },
    layer("wire"),
    layer("config"),
    Layer { module: "actions", never: &["exec"], only: None },
    Layer { module: "docker", never: &["control"], only: None },
    layer("exec"),
    Layer { module: "control", never: &["host", "store", "docker", "mcp", "inspect", "install"], only: None },
    layer("nginx"),
    layer("exit"),
    layer("logs"),
    Layer { module: "vocab", never: &[], only: Some(&["text"]) },
    layer("text"),
];

/// Edges that break the rules today and are known: each says why it is
/// still here. The lead removes an entry when the change that ends it lands;
/// nothing else belongs here.
const ALLOWED: &[(&str, &str)] = &[];

/// One reference: where it is, and the line as written.
#[derive(Debug, Clone)]
struct Site {
    file: PathBuf,
    line: usize,
    text: String,
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`None` for the crate
/// root and the binary).
fn module_of(path: &Path) -> Option<String> {
    let relative = path.strip_prefix(src()).unwrap();
    let first = relative.components().next()?.as_os_str().to_str()?.to_owned();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
    (name != "lib" && name != "main").then_some(name)
}

/// The modules a code line names as `crate::<module>` (also inside
/// `crate::{a, b::c}` groups and as `$crate::` in macros).
fn referenced(line: &str) -> Vec<String> {
    let ident =
        |s: &str| s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>();
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `volce_lab_crate::` and the like: not ours.
        }
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            found.extend(inner.split(',').map(|item| ident(item.trim())).filter(|m| !m.is_empty()));
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                found.push(name);
            }
        }
    }
    found
}

/// Every edge between two top-level modules, with each place it is made.
fn edges() -> BTreeMap<(String, String), Vec<Site>> {
    let modules: BTreeSet<&str> = LAYERS.iter().map(|l| l.module).collect();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut edges: BTreeMap<(String, String), Vec<Site>> = BTreeMap::new();
    for file in files {
        let Some(from) = module_of(&file) else { continue };
        // Unit-test files (`tests.rs`, `tests/`) are not in the shipped
        // graph: a test may build its fixtures from any layer (the wire
        // answers' tests build a stored plan to check the view of it).
        if is_unit_test_file(&file) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (index, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for to in referenced(line) {
                if to != from && modules.contains(to.as_str()) {
                    let site = Site {
                        file: file.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap().to_path_buf(),
                        line: index + 1,
                        text: line.trim().to_owned(),
                    };
                    edges.entry((from.clone(), to)).or_default().push(site);
                }
            }
        }
    }
    edges
}

fn is_unit_test_file(path: &Path) -> bool {
    let relative = path.strip_prefix(src()).unwrap();
    relative.file_name().is_some_and(|n| n == "tests.rs")
        || relative.components().any(|c| c.as_os_str() == "tests")
}

fn allowed(from: &str, to: &str) -> bool {
    ALLOWED.contains(&(from, to))
}

fn describe(sites: &[Site]) -> String {
    sites.iter().map(|s| format!("\n    {}:{}: {}", s.file.display(), s.line, s.text)).collect()
}

#[test]
fn the_layer_table_lists_every_module_in_the_order_of_the_layout_map() {
    let mut on_disk = BTreeSet::new();
    for entry in std::fs::read_dir(src()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() || path.extension().is_some_and(|e| e == "rs") {
            on_disk.extend(module_of(&path));
        }
    }
    let table: Vec<&str> = LAYERS.iter().map(|l| l.module).collect();
    assert_eq!(table.iter().copied().collect::<BTreeSet<_>>(), on_disk.iter().map(String::as_str).collect());
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared: BTreeSet<&str> =
        lib.lines().filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';')).collect();
    assert_eq!(declared, table.iter().copied().collect(), "src/lib.rs declares other modules than the table");
    // The layout map: lines `//! src/<module>.rs ...` or `//! src/<module>/ ...`.
    let map: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//! src/"))
        .filter_map(|l| l.split_whitespace().next())
        .map(|p| p.trim_end_matches('/').trim_end_matches(".rs"))
        .filter(|m| *m != "main")
        .collect();
    assert_eq!(map, table, "src/lib.rs's layout map and LAYERS list the modules in different orders");
}

#[test]
fn every_module_refers_only_to_the_layers_its_rules_allow() {
    let rank: BTreeMap<&str, usize> = LAYERS.iter().enumerate().map(|(i, l)| (l.module, i)).collect();
    let mut broken = Vec::new();
    for ((from, to), sites) in edges() {
        let layer = LAYERS.iter().find(|l| l.module == from).unwrap();
        let why = if layer.only.is_some_and(|only| !only.contains(&to.as_str())) {
            Some(format!("{from} may refer only to {:?}", layer.only.unwrap()))
        } else if layer.never.contains(&to.as_str()) {
            Some(format!("{from} must never refer to {to}"))
        } else if rank[to.as_str()] < rank[from.as_str()] && !allowed(&from, &to) {
            Some(format!("{from} refers to {to}, a layer above it in src/lib.rs's layout map"))
        } else {
            None
        };
        if let Some(why) = why {
            broken.push(format!("{why}:{}", describe(&sites)));
        }
    }
    assert!(broken.is_empty(), "layer rules broken:\n{}", broken.join("\n"));
}

#[test]
fn the_top_level_modules_have_no_import_cycle() {
    let edges = edges();
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        if !allowed(from, to) {
            graph.entry(from.as_str()).or_default().push(to.as_str());
        }
    }
    // Depth first; a module met again on the current path closes a cycle.
    fn visit<'a>(
        module: &'a str,
        graph: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(at) = path.iter().position(|m| *m == module) {
            let mut cycle = path[at..].to_vec();
            cycle.push(module);
            return Some(cycle);
        }
        if !done.insert(module) {
            return None;
        }
        path.push(module);
        for next in graph.get(module).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for layer in LAYERS {
        if let Some(cycle) = visit(layer.module, &graph, &mut Vec::new(), &mut done) {
            let sites: String = cycle
                .windows(2)
                .map(|pair| {
                    let sites = &edges[&(pair[0].to_owned(), pair[1].to_owned())];
                    format!("\n  {} -> {}:{}", pair[0], pair[1], describe(&sites[..1]))
                })
                .collect();
            panic!("import cycle {}:{sites}", cycle.join(" -> "));
        }
    }
}

#[test]
fn references_are_read_from_code_in_every_form_the_crate_uses() {
    assert_eq!(referenced("use crate::vocab::{Code, Refusal};"), ["vocab"]);
    assert_eq!(referenced("use crate::{actions::plan, store};"), ["actions", "store"]);
    assert_eq!(referenced("        $crate::vocab::string_form!(@common $type);"), ["vocab"]);
    assert_eq!(referenced("let x = crate::text::hex(&crate::docker::f());"), ["text", "docker"]);
    assert!(referenced("use volce_lab::control::Clock;").is_empty());
}

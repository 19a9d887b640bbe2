//! The runtime's layering, checked: every top-level module of `runtime/src` imports only
//! modules below it in `LAYERS` (the IR and the ops are one unit), and the two backends
//! never import each other. A new module must be given its place here; an import that
//! goes up fails with the file that made it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Bottom to top. Modules on one line form one unit and may import each other.
const LAYERS: &[&[&str]] = &[
    &["atomic_file"],
    &["types"],
    &["error"],
    &["memory"],
    &["tensor"],
    &["random"],
    &["kernel"],
    &["hlo"],
    &["ir", "ops"],
    &["backend"],
    &["autodiff"],
    &["nn"],
    &["optim"],
    &["loss"],
    &["metrics"],
    &["data"],
    &["strategy"],
    &["train"],
    &["checkpoint"],
    &["export"],
];

/// Folders whose files must not name each other: the backends are peers.
const PEERS: &[(&str, &str)] = &[("backend/native", "pjrt"), ("backend/pjrt", "native")];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The file's text without comments (a doc link is not an import).
fn code(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level modules a file names: `crate::m` and the first segments inside
/// `use crate::{a::x, b, ...}`.
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            // Nested groups only go deeper; the first segment of each item is what counts.
            for item in group[..end].split(',') {
                let item = item.trim().trim_start_matches('{').trim();
                names.insert(ident_at(item).to_string());
            }
        } else {
            names.insert(ident_at(rest).to_string());
        }
    }
    names
}

fn unit_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

#[test]
fn imports_only_go_down_the_layers() {
    let src = src();
    let mut modules = BTreeSet::new();
    for e in fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.is_dir() || (p.extension().is_some_and(|e| e == "rs") && name != "lib") {
            modules.insert(name);
        }
    }
    let unplaced: Vec<_> = modules.iter().filter(|m| unit_of(m).is_none()).collect();
    assert!(
        unplaced.is_empty(),
        "modules with no place in LAYERS: {unplaced:?}"
    );

    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut upward: BTreeMap<(String, String), String> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = top.trim_end_matches(".rs").to_string();
        if top == "lib" {
            continue;
        }
        let from = unit_of(&top).unwrap();
        for to in named_modules(&code(f)) {
            if let Some(u) = modules.get(&to).and_then(|m| unit_of(m)) {
                if u > from {
                    upward
                        .entry((top.clone(), to.clone()))
                        .or_insert_with(|| rel.display().to_string());
                }
            }
        }
    }
    let report: Vec<String> = upward
        .iter()
        .map(|((a, b), file)| format!("{a} -> {b} ({file})"))
        .collect();
    assert!(
        report.is_empty(),
        "imports that go up the layers:\n  {}",
        report.join("\n  ")
    );
}

#[test]
fn the_backends_do_not_import_each_other() {
    let src = src();
    let mut bad = Vec::new();
    for (dir, other) in PEERS {
        let mut files = Vec::new();
        rust_files(&src.join(dir), &mut files);
        for f in files {
            let c = code(&f);
            let names = [format!("backend::{other}"), format!("super::{other}")];
            if names.iter().any(|n| c.contains(n.as_str())) {
                bad.push(format!(
                    "{} names {other}",
                    f.strip_prefix(&src).unwrap().display()
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_check_sees_imports() {
    let c = "use crate::ir::{Graph, Value};\nuse crate::{kernel::data::Data, Error, ops};\nlet x = crate::train::f();";
    let names = named_modules(c);
    for m in ["ir", "kernel", "ops", "train", "Error"] {
        assert!(names.contains(m), "{m} not found in {names:?}");
    }
}

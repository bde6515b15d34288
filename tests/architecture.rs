//! The map stays true: every module of every crate appears in
//! `docs/architecture.md` under its crate, every end-to-end and crate test
//! file is named there, and each crate depends only on the Millpond crates
//! below it (`log` → `dataflow` → `sql` → `server` → `cli`; `nexmark`
//! beside the arrow). `.ci/run` checks the same direction with `cargo tree`;
//! this test keeps it in the README's test command.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The one-way flow, lowest first. A crate may depend on crates before it.
const FLOW: [&str; 5] = ["log", "dataflow", "sql", "server", "cli"];
/// Crates beside the arrow: they depend on no Millpond crate.
const STANDALONE: [&str; 2] = ["nexmark", "kafka-frame"];
/// Which crate may use which crate beside the arrow: the binary the
/// workload generator, the server the Kafka request decoder.
const BESIDE: [(&str, &str); 2] = [("cli", "nexmark"), ("server", "kafka-frame")];
/// Crates that must not reach the storage engine or the dataflow engine
/// directly (they go through `dataflow`'s public API).
const ABOVE_DATAFLOW_FORBIDDEN: [&str; 5] =
    ["rocksdb", "librocksdb-sys", "timely", "differential-dataflow", "millpond-log"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn crates() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| root().join("crates").join(name).join("Cargo.toml").exists())
        .collect();
    names.sort();
    names
}

/// The module names of a crate: `src/*.rs` (but `lib.rs`/`main.rs`) and
/// `src/*/` directories.
fn modules(krate: &str) -> Vec<String> {
    let src = root().join("crates").join(krate).join("src");
    let mut names = Vec::new();
    for entry in fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let module = path.extension().is_some_and(|e| e == "rs") || path.is_dir();
        if module && name != "lib" && name != "main" {
            names.push(name);
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The text of `docs/architecture.md` per crate section (`### \`crates/NAME\``).
fn sections() -> BTreeMap<String, String> {
    let text = fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let mut sections = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if line.starts_with("## ") || line.starts_with("### ") {
            if let Some((name, body)) = current.take() {
                sections.insert(name, body);
            }
            if let Some(rest) = line.strip_prefix("### `crates/") {
                current = Some((rest.split('`').next().unwrap().to_owned(), String::new()));
            }
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((name, body)) = current {
        sections.insert(name, body);
    }
    sections
}

#[test]
fn every_module_of_every_crate_is_on_the_map_under_its_crate() {
    let sections = sections();
    let mut missing = Vec::new();
    for krate in crates() {
        let Some(section) = sections.get(&krate) else {
            missing.push(format!("crate {krate} has no section"));
            continue;
        };
        for module in modules(&krate) {
            if !section.contains(&format!("`{module}`")) {
                missing.push(format!("{krate}::{module}"));
            }
        }
    }
    assert!(missing.is_empty(), "docs/architecture.md misses: {missing:?}");
}

#[test]
fn every_test_file_is_on_the_map() {
    let text = fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let mut files: Vec<String> = Vec::new();
    let mut dirs = vec![root().join("tests")];
    dirs.extend(crates().iter().map(|k| root().join("crates").join(k).join("tests")));
    for dir in dirs.into_iter().filter(|d| d.is_dir()) {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                files.push(path.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let missing: Vec<&String> = files.iter().filter(|file| !text.contains(&format!("`{file}`"))).collect();
    assert!(missing.is_empty(), "docs/architecture.md names no test file {missing:?}");
}

/// The `[dependencies]` of a crate's Cargo.toml: names only.
fn dependencies(krate: &str) -> Vec<String> {
    let text = fs::read_to_string(root().join("crates").join(krate).join("Cargo.toml")).unwrap();
    let mut in_deps = false;
    let mut deps = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.', ' ']).next().unwrap().trim();
            deps.push(name.to_owned());
        }
    }
    deps
}

#[test]
fn each_crate_depends_only_on_the_millpond_crates_below_it() {
    let mut wrong = Vec::new();
    for krate in crates() {
        let deps = dependencies(&krate);
        let allowed: Vec<String> = match FLOW.iter().position(|k| *k == krate) {
            Some(level) => FLOW[..level].iter().map(|k| format!("millpond-{k}")).collect(),
            None => {
                assert!(STANDALONE.contains(&krate.as_str()), "crate {krate} is neither on the flow nor beside it");
                Vec::new()
            }
        };
        let beside: Vec<String> =
            BESIDE.iter().filter(|(user, _)| *user == krate).map(|(_, k)| format!("millpond-{k}")).collect();
        for dep in deps.iter().filter(|d| d.starts_with("millpond-")) {
            if !allowed.contains(dep) && !beside.contains(dep) {
                wrong.push(format!("{krate} depends on {dep}"));
            }
        }
        let level = FLOW.iter().position(|k| *k == krate);
        if level.is_some_and(|l| l >= 2) && krate != "cli" {
            for dep in deps.iter().filter(|d| ABOVE_DATAFLOW_FORBIDDEN.contains(&d.as_str())) {
                wrong.push(format!("{krate} depends on {dep}, below dataflow's API"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:?}");
}

#[test]
fn the_dependency_parser_sees_the_known_edges() {
    // Guards the test above against a Cargo.toml layout it cannot read.
    assert!(dependencies("dataflow").contains(&"millpond-log".to_owned()));
    assert!(dependencies("sql").contains(&"millpond-dataflow".to_owned()));
    assert!(dependencies("cli").contains(&"millpond-sql".to_owned()));
    assert!(modules("log").contains(&"segment".to_owned()));
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The one module allowed unsafe code (librdkafka's batch consume).
const UNSAFE_MODULE: &str = "crates/dataflow/src/kafka_queue.rs";

#[test]
fn unsafe_code_is_forbidden_everywhere_but_the_one_module_that_says_why() {
    for krate in crates() {
        let src = root().join("crates").join(&krate).join("src");
        let roots: Vec<PathBuf> = ["lib.rs", "main.rs"].iter().map(|f| src.join(f)).filter(|p| p.exists()).collect();
        assert!(!roots.is_empty(), "crate {krate} has no lib.rs or main.rs");
        for file in roots {
            let text = fs::read_to_string(&file).unwrap();
            let level = if krate == "dataflow" { "#![deny(unsafe_code)]" } else { "#![forbid(unsafe_code)]" };
            assert!(text.contains(level), "{} lacks {level}", file.display());
        }
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            let text = fs::read_to_string(&file).unwrap();
            let relative = file.strip_prefix(root()).unwrap().to_string_lossy().replace('\\', "/");
            if relative == UNSAFE_MODULE {
                let blocks = text.matches("unsafe {").count();
                let reasons = text.matches("// SAFETY:").count();
                assert!(text.contains("#![allow(unsafe_code)]") && blocks > 0, "{relative}");
                assert!(reasons >= blocks, "{relative}: {blocks} unsafe blocks, {reasons} SAFETY comments");
            } else {
                assert!(!text.contains("allow(unsafe_code)"), "{relative} allows unsafe code");
            }
        }
    }
}

//! The README and `docs/` stay what a newcomer can trust: the README
//! is at most 15 KB with the reference in `docs/`; every relative link (and its `#anchor`)
//! resolves; every subcommand of `ebpf-prof --help` has its section in `docs/commands.md`; the
//! Rust version the README asks for is the `rust-version` of Cargo.toml; every example that
//! shows output is one `scripts/readme-examples.sh` reruns; and no text claims that a program
//! loaded while `bpf_jit_kallsyms=0` never gets a symbol (false since Linux 4.11).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Documents that other branches add; links to them are not checked until they exist.
/// The lead removes this list once those branches are merged.
const PENDING: &[&str] = &[];

const README_MAX_BYTES: usize = 15 * 1024;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// README.md and every `docs/*.md`, as paths relative to the repository.
fn documents() -> Vec<String> {
    let mut v = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    v.extend(docs);
    v
}

/// The targets of the Markdown links `[text](target)` outside code blocks and code spans.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let line = strip_code_spans(line);
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            match after.find(')') {
                Some(j) => {
                    out.push(after[..j].to_string());
                    rest = &after[j..];
                }
                None => break,
            }
        }
    }
    out
}

fn strip_code_spans(line: &str) -> String {
    line.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, s)| s)
        .collect::<Vec<_>>()
        .join("")
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut set = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            set.insert(slug(line.trim_start_matches('#')));
        }
    }
    set
}

#[test]
fn slug_is_githubs() {
    assert_eq!(slug(" `overhead`"), "overhead");
    assert_eq!(slug(" The kernel's own view"), "the-kernels-own-view");
    assert_eq!(
        slug(" Under load: working sets, map pressure, sweeps"),
        "under-load-working-sets-map-pressure-sweeps"
    );
}

#[test]
fn readme_is_at_most_15_kb() {
    let n = read("README.md").len();
    assert!(
        n <= README_MAX_BYTES,
        "README.md is {n} bytes, more than {README_MAX_BYTES}: move reference material into docs/"
    );
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for doc in documents() {
        let text = read(&doc);
        let dir = Path::new(&doc).parent().unwrap_or(Path::new(""));
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let rel = if file.is_empty() {
                PathBuf::from(&doc)
            } else {
                normalize(&dir.join(file))
            };
            let rel_str = rel.to_string_lossy().into_owned();
            if PENDING.contains(&rel_str.as_str()) && !root().join(&rel).exists() {
                continue;
            }
            if !root().join(&rel).exists() {
                broken.push(format!("{doc}: ({target}): no file {rel_str}"));
                continue;
            }
            if let (Some(a), true) = (anchor, rel_str.ends_with(".md")) {
                if !anchors(&read(&rel_str)).contains(a) {
                    broken.push(format!("{doc}: ({target}): no heading #{a} in {rel_str}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// `docs/../README.md` → `README.md`, without touching the file system.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn link_parser_skips_code() {
    let l = links("see [a](docs/a.md) and `[b](b.md)`\n```\n[c](c.md)\n```\n[d](#x)");
    assert_eq!(l, vec!["docs/a.md".to_string(), "#x".to_string()]);
}

/// The subcommands `ebpf-prof --help` lists (its `Commands:` section), `help` aside.
fn subcommands() -> Vec<String> {
    let mut cmd = std::process::Command::new(common::bin());
    cmd.arg("--help");
    let r = common::run(cmd);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let text = r.stdout();
    let section = text
        .split("Commands:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Commands: section in --help {r:?}"));
    section
        .lines()
        .skip(1) // the rest of the `Commands:` line
        .take_while(|l| !l.trim().is_empty())
        // A command's line is indented by two spaces; a wrapped description by more.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help" && is_name(name))
        .map(str::to_string)
        .collect()
}

fn is_name(s: &str) -> bool {
    s.chars().all(|c| c.is_ascii_lowercase() || c == '-')
}

#[test]
fn every_subcommand_has_a_section_in_docs_commands() {
    let names = subcommands();
    assert!(names.len() >= 9, "too few subcommands parsed: {names:?}");
    let doc = read("docs/commands.md");
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !doc.lines().any(|l| l == format!("## `{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/commands.md has no \"## `NAME`\" section for {missing:?}"
    );
}

/// The packages `scripts/install-deps.sh` installs: the first word of each `need` line (perf's
/// package, named by a function there, as `perf`).
fn packages_the_script_installs() -> Vec<String> {
    read("scripts/install-deps.sh")
        .lines()
        .filter_map(|line| line.strip_prefix("need "))
        .map(|rest| rest.split_whitespace().next().unwrap_or_default())
        .map(|word| match word {
            "\"$(perf_pkg)\"" => "perf".to_string(),
            other => other.to_string(),
        })
        .collect()
}

#[test]
fn readme_lists_every_package_the_install_script_installs() {
    let readme = read("README.md");
    let start = readme
        .find("**What the scripts install")
        .expect("the README says what the scripts install");
    let paragraph = &readme[start
        ..readme[start..]
            .find("\n\n")
            .map_or(readme.len(), |end| start + end)];
    let words: BTreeSet<&str> = paragraph
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .collect();
    let packages = packages_the_script_installs();
    assert!(
        packages.len() >= 10,
        "the script's need lines: {packages:?}"
    );
    let missing: Vec<&String> = packages
        .iter()
        .filter(|p| !words.contains(p.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "README's install list lacks {missing:?}: {paragraph}"
    );
}

#[test]
fn readme_asks_for_the_rust_version_of_cargo_toml() {
    let toml = read("Cargo.toml");
    let version = toml
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .map(|v| v.trim().trim_matches('"').to_string())
        .expect("rust-version in Cargo.toml");
    let readme = read("README.md");
    assert!(
        readme.contains(&format!("**{version}**")),
        "README.md does not ask for Rust {version} (the rust-version of Cargo.toml)"
    );
}

/// The names of the `<!-- example: NAME -->` markers in the documents, with where they are.
fn markers() -> Vec<(String, String)> {
    let mut v = Vec::new();
    for doc in documents() {
        for line in read(&doc).lines() {
            if let Some(n) = line
                .trim()
                .strip_prefix("<!-- example: ")
                .and_then(|r| r.strip_suffix(" -->"))
            {
                v.push((n.to_string(), doc.clone()));
            }
        }
    }
    v
}

#[test]
fn every_example_with_output_is_rerun_by_the_script() {
    let script = read("scripts/readme-examples.sh");
    let order = script
        .split("ORDER=(")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .expect("ORDER=( … ) in scripts/readme-examples.sh");
    let order: BTreeSet<String> = order.split_whitespace().map(str::to_string).collect();
    let found = markers();
    let names: Vec<&String> = found.iter().map(|(n, _)| n).collect();
    let unique: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    assert_eq!(unique.len(), names.len(), "a marker twice: {found:?}");
    assert_eq!(
        unique, order,
        "markers in the documents and ORDER in scripts/readme-examples.sh differ"
    );
    for doc in documents() {
        unmarked_output_blocks(&doc, &read(&doc));
    }
}

/// Panics on a fenced block that shows a `$ command` and its output without a marker before it.
fn unmarked_output_blocks(doc: &str, text: &str) {
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with("```") {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let body_start = i;
        while i < lines.len() && !lines[i].starts_with("```") {
            i += 1;
        }
        let body = &lines[body_start..i.min(lines.len())];
        let shows_output = body.iter().any(|l| l.starts_with("$ "))
            && body
                .iter()
                .any(|l| !l.starts_with("$ ") && !l.trim().is_empty());
        let marked = start > 0 && lines[start - 1].starts_with("<!-- example: ");
        assert!(
            !shows_output || marked,
            "{doc}:{}: a block shows command output without an `<!-- example: NAME -->` marker, so scripts/readme-examples.sh does not rerun it",
            start + 1
        );
        i += 1;
    }
}

/// Since Linux 4.11 a JIT-ed program is added to the kernel's symbol table at load
/// whatever `bpf_jit_kallsyms` says; the sysctl only gates the /proc/kallsyms listing, at read
/// time. No document or message may say otherwise.
#[test]
fn no_text_claims_programs_loaded_with_the_sysctl_off_never_get_symbols() {
    let mut files = documents();
    files.push("CHANGELOG.md".into());
    rust_files("src", &mut files);
    for f in files {
        let text = read(&f).to_lowercase().replace('\n', " ");
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for claim in [
            "never gets a symbol",
            "never get a symbol",
            "never get symbols",
        ] {
            assert!(!text.contains(claim), "{f} still says \"{claim}\"");
        }
    }
}

/// Every `.rs` file under `dir` (relative to the repository), recursively.
fn rust_files(dir: &str, out: &mut Vec<String>) {
    for e in std::fs::read_dir(root().join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}")) {
        let e = e.expect("entry");
        let rel = format!("{dir}/{}", e.file_name().to_string_lossy());
        if e.file_type().expect("file type").is_dir() {
            rust_files(&rel, out);
        } else if rel.ends_with(".rs") {
            out.push(rel);
        }
    }
}

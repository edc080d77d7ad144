//! Compiles every `fixtures/hooks/**/*.bpf.c` into `$OUT_DIR/hooks/**/*.bpf.o` with clang,
//! so that `src/bpf` can bundle the sample hooks with `include_bytes!`, and lists the top-level
//! ones in `$OUT_DIR/hooks/examples.rs` (`ebpf-prof hook --write-objects`).
//!
//! `$CLANG` overrides the compiler. A missing or failing clang stops the build with one line
//! saying what to install.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const HOOKS_DIR: &str = "fixtures/hooks";
/// The folders of `HOOKS_DIR` whose objects `hook --write-objects` writes: the top level, the
/// calibrated packet programs, the test run's classifiers and the trivial packet programs of
/// `overhead`'s third arm (`bad/` holds refused inputs).
const EXAMPLE_FOLDERS: [&str; 4] = ["", "packet", "testrun", "trivial"];
const INSTALL_HINT: &str = "the bundled BPF hooks need clang and the libbpf headers: \
    apt-get install clang libbpf-dev (or point $CLANG at a clang with a BPF target)";

fn main() {
    if let Err(message) = run() {
        println!("cargo:warning={message}");
        eprintln!("error: {message}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let out_dir = PathBuf::from(env::var("OUT_DIR").map_err(|e| format!("OUT_DIR: {e}"))?);
    let target = Target::from_env()?;
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-changed={HOOKS_DIR}");
    let mut sources = Vec::new();
    collect(Path::new(HOOKS_DIR), &mut sources)?;
    sources.sort();
    for source in &sources {
        compile(&clang, &target, source, &out_dir)?;
    }
    write_index(&sources, &out_dir)
}

/// `$OUT_DIR/hooks/examples.rs`: every object compiled from `fixtures/hooks/` and its
/// [`EXAMPLE_FOLDERS`] (not `bad/`), by file name, for `ebpf-prof hook --write-objects DIR`.
/// The file names are unique across the folders.
fn write_index(sources: &[PathBuf], out_dir: &Path) -> Result<(), String> {
    let mut index = String::from(
        "/// Every example object compiled from `fixtures/hooks/`, by file name (sorted).\n\
         pub const EXAMPLE_OBJECTS: &[(&str, &[u8])] = &[\n",
    );
    for source in sources {
        let relative = source.strip_prefix(HOOKS_DIR).unwrap_or(source);
        let folder = relative.parent().and_then(|p| p.to_str()).unwrap_or("");
        if !EXAMPLE_FOLDERS.contains(&folder) {
            continue;
        }
        let object = out_dir.join("hooks").join(relative).with_extension("o");
        let name = Path::new(relative.file_name().unwrap_or_default()).with_extension("o");
        index.push_str(&format!(
            "    ({:?}, include_bytes!({:?})),\n",
            name.display().to_string(),
            object.display().to_string()
        ));
    }
    index.push_str("];\n");
    let path = out_dir.join("hooks").join("examples.rs");
    fs::write(&path, index).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The two arch-dependent clang arguments, from the Cargo target.
struct Target {
    /// `x86` for `-D__TARGET_ARCH_x86`, as bpf_tracing.h expects.
    bpf_arch: &'static str,
    /// Debian's multiarch include directory holding `asm/types.h`.
    multiarch: &'static str,
}

impl Target {
    fn from_env() -> Result<Target, String> {
        let arch = env::var("CARGO_CFG_TARGET_ARCH").map_err(|e| format!("target arch: {e}"))?;
        let (bpf_arch, multiarch) = match arch.as_str() {
            "x86_64" => ("x86", "x86_64-linux-gnu"),
            "aarch64" => ("arm64", "aarch64-linux-gnu"),
            "riscv64" => ("riscv", "riscv64-linux-gnu"),
            "powerpc64" => ("powerpc", "powerpc64le-linux-gnu"),
            "s390x" => ("s390", "s390x-linux-gnu"),
            "loongarch64" => ("loongarch", "loongarch64-linux-gnu"),
            "arm" => ("arm", "arm-linux-gnueabihf"),
            other => return Err(format!("no BPF target arch known for `{other}`")),
        };
        Ok(Target {
            bpf_arch,
            multiarch,
        })
    }
}

/// Every `*.bpf.c` under `dir`, recursively; headers next to them are rerun triggers too.
fn collect(dir: &Path, sources: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("reading {}: {e}", dir.display()))?
            .path();
        if path.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
            collect(&path, sources)?;
            continue;
        }
        let name = path.to_string_lossy();
        if name.ends_with(".bpf.c") || name.ends_with(".h") {
            println!("cargo:rerun-if-changed={name}");
        }
        if name.ends_with(".bpf.c") {
            sources.push(path);
        }
    }
    Ok(())
}

/// `fixtures/hooks/bad/x.bpf.c` becomes `$OUT_DIR/hooks/bad/x.bpf.o`.
fn compile(clang: &str, target: &Target, source: &Path, out_dir: &Path) -> Result<(), String> {
    let relative = source.strip_prefix(HOOKS_DIR).unwrap_or(source);
    let object = out_dir.join("hooks").join(relative).with_extension("o");
    if let Some(parent) = object.parent() {
        fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    let output = Command::new(clang)
        .args(["-O2", "-g", "-Wall", "-target", "bpf"])
        .arg(format!("-D__TARGET_ARCH_{}", target.bpf_arch))
        .arg(format!("-I/usr/include/{}", target.multiarch))
        .arg("-c")
        .arg(source)
        .arg("-o")
        .arg(&object)
        .output()
        .map_err(|e| format!("cannot run `{clang}` ({e}); {INSTALL_HINT}"))?;
    if output.status.success() {
        return Ok(());
    }
    // clang's own diagnostics first, so the reason is visible above the hint.
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    Err(format!(
        "`{clang}` failed to compile {} ({}); {INSTALL_HINT}",
        source.display(),
        output.status
    ))
}

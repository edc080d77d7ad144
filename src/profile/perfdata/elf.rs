//! Symbols of user-space binaries, found and chosen the way perf 6.1's `dso__load` does for a
//! user DSO: candidate files in perf's order (debuglink, build-id cache, distribution debug
//! directories, the file itself), each refused when its build id differs from the recorded
//! one; `.symtab` from the first file that has one and `.dynsym` from the first that has one;
//! both tables loaded into one (addresses turned into file offsets, sizes and aliases fixed
//! up); then `name@plt` entries. Files are read through a cache, never whole.
//!
//! Source: `tools/perf/util/symbol.c: dso__load()`, `binary_type_symtab[]`;
//! `tools/perf/util/dso.c: dso__read_binary_type_filename()`; `tools/perf/util/symbol-elf.c:
//! symsrc__init()`, `dso__load_sym_internal()`, `dso__synthesize_plt_symbols()`,
//! `elf_read_build_id()`; `tools/perf/util/build-id.c: __dso__build_id_filename()`.

use super::buildid::hex;
use super::cursor::c_str;
use super::demangle::demangle;
use super::symtab::SymTab;
use object::elf::{self, FileHeader64, SectionHeader64, Sym64};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, SectionTable, Sym};
use object::{Endian as _, Endianness, ReadCache, SectionIndex};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// What is known of a user DSO before loading it.
#[derive(Debug, Clone)]
pub(crate) struct DsoRequest<'a> {
    /// perf's long name: the mapped path, or `[vdso]`.
    pub name: &'a str,
    /// The build id recorded in the BUILD_ID feature.
    pub build_id: Option<&'a [u8]>,
    /// perf's build-id cache directory (`~/.debug`).
    pub buildid_dir: Option<&'a Path>,
}

fn is_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file())
}

/// Open a binary for reading when it is a regular file; as root, a symbolic link is not
/// followed (a link another user planted could point root at any file). The open does not wait
/// (a FIFO a perf.data names would block it until a writer came), and the type is checked on
/// the opened file, so a name swapped after a check of the path is no way around it.
fn open_nofollow_as_root(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if crate::host::security::is_root() {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .ok()?;
    file.metadata().ok().filter(|meta| meta.is_file())?;
    Some(file)
}

/// An opened candidate.
struct Source {
    cache: ReadCache<File>,
    len: u64,
}

type Sections<'a> = SectionTable<'a, FileHeader64<Endianness>, &'a ReadCache<File>>;

/// A parsed view of a [`Source`].
struct View<'a> {
    data: &'a ReadCache<File>,
    len: u64,
    e: Endianness,
    sections: Sections<'a>,
    phdrs: &'a [object::elf::ProgramHeader64<Endianness>],
}

impl Source {
    fn open(path: &Path) -> Option<Rc<Source>> {
        let f = open_nofollow_as_root(path)?;
        let len = f.metadata().ok()?.len();
        Some(Rc::new(Source {
            cache: ReadCache::new(f),
            len,
        }))
    }

    fn view(&self) -> Option<View<'_>> {
        let data = &self.cache;
        let kind = object::FileKind::parse(data).ok()?;
        if kind != object::FileKind::Elf64 {
            return None; // 32-bit ELF: no symbols (see mod.rs)
        }
        let h = FileHeader64::<Endianness>::parse(data).ok()?;
        let e = h.endian().ok()?;
        Some(View {
            data,
            len: self.len,
            e,
            sections: h.sections(e, data).ok()?,
            phdrs: h.program_headers(e, data).ok()?,
        })
    }
}

impl<'a> View<'a> {
    /// The first section called `name` (`elf_section_by_name`).
    fn by_name(&self, name: &[u8]) -> Option<(SectionIndex, &'a SectionHeader64<Endianness>)> {
        self.sections.section_by_name(self.e, name)
    }

    /// A section's bytes, refusing sizes the file cannot hold.
    fn bytes(&self, s: &SectionHeader64<Endianness>) -> Option<&'a [u8]> {
        let (off, size) = s.file_range(self.e)?;
        if off.checked_add(size)? > self.len {
            return None;
        }
        s.data(self.e, self.data).ok()
    }

    fn table(
        &self,
        name: &[u8],
        kind: u32,
    ) -> Option<(SectionIndex, &'a SectionHeader64<Endianness>)> {
        self.by_name(name)
            .filter(|(_, s)| s.sh_type(self.e) == kind)
    }

    fn build_id(&self) -> Option<Vec<u8>> {
        let (_, s) = [&b".note.gnu.build-id"[..], b".notes", b".note"]
            .iter()
            .find_map(|n| self.by_name(n))?;
        let mut notes = s.notes(self.e, self.data).ok()??;
        while let Ok(Some(n)) = notes.next() {
            if n.name() == b"GNU" && n.n_type(self.e) == elf::NT_GNU_BUILD_ID {
                return Some(n.desc().iter().take(20).copied().collect());
            }
        }
        None
    }

    fn debuglink(&self) -> Option<String> {
        let (_, s) = self.by_name(b".gnu_debuglink")?;
        Some(String::from_utf8_lossy(c_str(self.bytes(s)?)).into_owned())
    }

    fn section_name(&self, s: &SectionHeader64<Endianness>) -> &'a [u8] {
        self.sections.section_name(self.e, s).unwrap_or_default()
    }
}

/// The build id of the ELF file at `path`.
pub(crate) fn file_build_id(path: &Path) -> Option<Vec<u8>> {
    Source::open(path)?.view()?.build_id()
}

/// The candidate files, in perf's `binary_type_symtab` order, for a user DSO.
fn candidates(req: &DsoRequest<'_>, bid: Option<&[u8]>) -> Vec<PathBuf> {
    let name = req.name;
    let mut out = Vec::new();
    if let Some(p) = debuglink_path(name) {
        out.push(p);
    }
    if let (Some(bid), Some(dir)) = (bid, req.buildid_dir) {
        let h = hex(bid);
        let link = dir
            .join(".build-id")
            .join(&h[..2.min(h.len())])
            .join(h.get(2..).unwrap_or_default());
        let vdso = name == "[vdso]";
        for base in [
            if vdso { "vdso" } else { "elf" },
            if vdso { "vdso" } else { "debug" },
        ] {
            out.push(if is_file(&link) {
                link.clone()
            } else {
                link.join(base)
            });
        }
    }
    out.push(PathBuf::from(format!("/usr/lib/debug{name}.debug")));
    out.push(PathBuf::from(format!("/usr/lib/debug{name}")));
    if let Some(bid) = bid {
        let h = hex(bid);
        out.push(PathBuf::from(format!(
            "/usr/lib/debug/.build-id/{}/{}.debug",
            h.get(..2).unwrap_or_default(),
            h.get(2..).unwrap_or_default()
        )));
    }
    // The binary itself, by an absolute path only: a name such as `[vdso]` or `bench` would
    // be looked up in the current directory, where anyone may have put a file of that name.
    if let Some((dir, base)) = name.rsplit_once('/').filter(|_| name.starts_with('/')) {
        out.push(PathBuf::from(name));
        out.push(PathBuf::from(format!("{dir}/.debug/{base}")));
    }
    if let Some(rest) = name.strip_prefix("/usr/lib/") {
        out.push(PathBuf::from(format!("/usr/lib/debug/lib/{rest}")));
    }
    out
}

/// DEBUGLINK: the file named by `.gnu_debuglink`, looked for beside the binary and in the
/// system debug directory ([`debuglink_candidates`]).
fn debuglink_path(name: &str) -> Option<PathBuf> {
    let path = Path::new(name);
    if !is_file(path) {
        return None;
    }
    let link = Source::open(path)?.view()?.debuglink()?;
    debuglink_candidates(name, &link)
        .into_iter()
        .find(|p| is_file(p))
}

/// Where the debug file `link` of the binary `name` may be: beside it, in `.debug/` beside it,
/// and under /usr/lib/debug. perf also tries the bare name, which is the current directory:
/// anyone who can write there (a `<build-id>.debug` planted in /tmp) would name another user's
/// frames, so it is never looked at. A binary known by no absolute path has no place of its
/// own, and a link that is no plain file name (`../x`) is not followed.
fn debuglink_candidates(name: &str, link: &str) -> Vec<PathBuf> {
    let plain = !link.is_empty() && !link.contains('/') && link != "." && link != "..";
    let Some((dir, _)) = name
        .rsplit_once('/')
        .filter(|_| plain && name.starts_with('/'))
    else {
        return Vec::new();
    };
    [
        format!("{dir}/{link}"),
        format!("{dir}/.debug/{link}"),
        format!("/usr/lib/debug{dir}/{link}"),
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

/// Load a user DSO's symbols, in file-offset space; `None` when perf would find none.
pub(crate) fn load_dso(req: &DsoRequest<'_>) -> Option<SymTab> {
    let own_bid = || {
        is_file(Path::new(req.name))
            .then(|| file_build_id(Path::new(req.name)))
            .flatten()
    };
    let bid: Option<Vec<u8>> = req.build_id.map(<[u8]>::to_vec).or_else(own_bid);
    let (mut syms, mut runtime): (Option<Rc<Source>>, Option<Rc<Source>>) = (None, None);
    for cand in candidates(req, bid.as_deref()) {
        if !is_file(&cand) {
            continue;
        }
        let Some(src) = Source::open(&cand) else {
            continue;
        };
        let Some(v) = src.view() else {
            continue;
        };
        if bid.is_some() && v.build_id().as_deref() != bid.as_deref() {
            continue; // perf: "build id mismatch"
        }
        let symtab = v.table(b".symtab", elf::SHT_SYMTAB).is_some();
        let dynsym = v.table(b".dynsym", elf::SHT_DYNSYM).is_some();
        if syms.is_none() && symtab {
            syms = Some(Rc::clone(&src));
        }
        if runtime.is_none() && dynsym {
            runtime = Some(Rc::clone(&src));
        }
        if syms.is_some() && runtime.is_some() {
            break;
        }
    }
    let syms = syms.or_else(|| runtime.clone())?;
    let runtime = runtime.unwrap_or_else(|| Rc::clone(&syms));
    let (sv, rv) = (syms.view()?, runtime.view()?);
    let mut tab = SymTab::default();
    for (name, kind) in [
        (&b".symtab"[..], elf::SHT_SYMTAB),
        (b".dynsym", elf::SHT_DYNSYM),
    ] {
        if let Some((_, s)) = sv.table(name, kind) {
            load_table(&sv, &rv, s, &mut tab)?;
            tab.sort();
            tab.fixup_end(false);
            tab.dedup();
        }
    }
    add_plt(&rv, &mut tab);
    tab.sort();
    Some(tab)
}

/// The symbols and string table of a symbol section.
fn symbols<'a>(
    v: &View<'a>,
    s: &SectionHeader64<Endianness>,
) -> Option<(&'a [Sym64<Endianness>], &'a [u8])> {
    let raw = v.bytes(s)?;
    let n = raw.len() / std::mem::size_of::<Sym64<Endianness>>();
    let (syms, _) = object::pod::slice_from_bytes::<Sym64<Endianness>>(raw, n).ok()?;
    let strs = v
        .sections
        .section(SectionIndex(s.sh_link(v.e) as usize))
        .ok()?;
    Some((syms, v.bytes(strs)?))
}

/// `dso__load_sym_internal` for one table; `None` where perf fails the whole load.
fn load_table(
    sv: &View<'_>,
    rv: &View<'_>,
    s: &SectionHeader64<Endianness>,
    tab: &mut SymTab,
) -> Option<()> {
    let e = sv.e;
    let (syms, strs) = symbols(sv, s)?;
    for sym in syms {
        let Some(value) = symbol_value(sv, rv, sym)? else {
            continue;
        };
        let raw = c_str(strs.get(sym.st_name(e) as usize..).unwrap_or_default());
        let name = String::from_utf8_lossy(raw);
        let name = demangle(&name).map_or(name, Into::into);
        tab.push(value, sym.st_size(e), sym.st_bind(), &name);
    }
    Some(())
}

/// The file offset perf gives a symbol: `Some(None)` to skip it, `None` to fail the load.
fn symbol_value(sv: &View<'_>, rv: &View<'_>, sym: &Sym64<Endianness>) -> Option<Option<u64>> {
    let e = sv.e;
    let shndx = sym.st_shndx(e);
    let named = sym.st_name(e) != 0 && shndx != elf::SHN_UNDEF;
    let is_label = sym.st_type() == elf::STT_NOTYPE
        && named
        && shndx != elf::SHN_ABS
        && !matches!(sym.st_visibility(), elf::STV_HIDDEN | elf::STV_INTERNAL);
    let wanted = named
        && matches!(
            sym.st_type(),
            elf::STT_FUNC | elf::STT_GNU_IFUNC | elf::STT_OBJECT
        );
    if (!is_label && !wanted) || shndx == elf::SHN_ABS {
        return Some(None);
    }
    let idx = SectionIndex(usize::from(shndx));
    // A section index past the table (seen in BOLT-ed librustc_driver): perf names the other
    // symbols of the file, so skip this one rather than fail the load.
    let Ok(mut sec) = sv.sections.section(idx) else {
        return Some(None);
    };
    if sec.sh_flags(e) & u64::from(elf::SHF_ALLOC) == 0 {
        return Some(None);
    }
    let mut names = sv;
    if sec.sh_type(e) == elf::SHT_NOBITS {
        sec = rv.sections.section(idx).ok()?;
        names = rv;
    }
    if is_label {
        let n = names.section_name(sec);
        let has = |w: &[u8]| n.windows(w.len()).any(|x| x == w);
        if !has(b"text") && !has(b"data") {
            return Some(None);
        }
    }
    let v = sym.st_value(e);
    let load = rv.phdrs.iter().find(|p| {
        let sz = p.p_memsz(e).max(p.p_filesz(e));
        p.p_type(e) == elf::PT_LOAD && sz != 0 && v >= p.p_vaddr(e) && v - p.p_vaddr(e) < sz
    });
    let delta = match load {
        Some(p) => p.p_vaddr(e).wrapping_sub(p.p_offset(e)),
        None => sec.sh_addr(e).wrapping_sub(sec.sh_offset(e)),
    };
    Some(Some(v.wrapping_sub(delta)))
}

/// `dso__synthesize_plt_symbols`: one `name@plt` per `.rela.plt` entry, laid out from the
/// second `.plt` slot (x86's entry size is the section's `sh_entsize`).
fn add_plt(rv: &View<'_>, tab: &mut SymTab) -> Option<()> {
    let e = rv.e;
    let (dynidx, dynsym) = rv.table(b".dynsym", elf::SHT_DYNSYM)?;
    let (_, rel) = rv
        .by_name(b".rela.plt")
        .or_else(|| rv.by_name(b".rel.plt"))?;
    if rel.sh_link(e) as usize != dynidx.0 {
        return None;
    }
    let (_, plt) = rv.by_name(b".plt")?;
    let (syms, strs) = symbols(rv, dynsym)?;
    let relsize = rel.sh_entsize(e);
    if strs.is_empty() || relsize == 0 {
        return None;
    }
    let entry = plt.sh_entsize(e);
    let mut at = plt.sh_offset(e).wrapping_add(entry);
    let rela = rel.sh_type(e) == elf::SHT_RELA;
    let step = if rela { 24 } else { 16 };
    for r in rv
        .bytes(rel)?
        .chunks_exact(step)
        .take((rel.sh_size(e) / relsize) as usize)
    {
        let info = e.read_u64_bytes(r.get(8..16)?.try_into().ok()?);
        let name = syms
            .get((info >> 32) as usize)
            .map(|s| {
                String::from_utf8_lossy(c_str(
                    strs.get(s.st_name(e) as usize..).unwrap_or_default(),
                ))
            })
            .unwrap_or_default();
        let name = demangle(&name).map_or(name, Into::into);
        tab.push(at, entry, super::symtab::GLOBAL, &format!("{name}@plt"));
        at = at.wrapping_add(entry);
    }
    Some(())
}

/// perf map files (`/tmp/perf-PID.map`): `START SIZE name` in hex, one per line
/// (`dso__load_perf_map`); no fix-ups.
pub(crate) fn load_perf_map(path: &Path) -> Option<SymTab> {
    use std::io::Read;
    let mut text = Vec::new();
    open_nofollow_as_root(path)?
        .take(256 << 20)
        .read_to_end(&mut text)
        .ok()?;
    let mut tab = SymTab::default();
    for line in text.split(|&b| b == b'\n') {
        let mut it = line.splitn(3, |&b| b == b' ');
        let (Some(a), Some(s), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let hexnum = |b: &[u8]| u64::from_str_radix(std::str::from_utf8(b).ok()?, 16).ok();
        if let (Some(a), Some(s)) = (hexnum(a), hexnum(s)) {
            tab.push(a, s, super::symtab::GLOBAL, &String::from_utf8_lossy(name));
        }
    }
    tab.sort();
    Some(tab)
}

#[cfg(test)]
mod open_tests {
    use super::*;

    #[test]
    fn a_fifo_or_a_directory_named_as_a_binary_is_not_opened_and_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("not-a-binary");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path in a directory of the test's own.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let (sent, received) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = sent.send(open_nofollow_as_root(&fifo).is_none());
        });
        let refused = received.recv_timeout(std::time::Duration::from_secs(5));
        assert_eq!(refused, Ok(true), "the FIFO is refused at once");
        assert!(open_nofollow_as_root(dir.path()).is_none(), "a directory");
        let binary = dir.path().join("binary");
        std::fs::write(&binary, b"\x7fELF").unwrap();
        assert!(open_nofollow_as_root(&binary).is_some(), "a regular file");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `<build-id>.debug` planted in the current directory named another user's frames:
    /// debug files are looked for only beside the binary and under /usr/lib/debug.
    #[test]
    fn regression_debug_files_are_never_looked_for_in_the_current_directory() {
        let link = "0123456789abcdef0123456789abcdef01234567.debug";
        let found = debuglink_candidates("/usr/bin/victim", link);
        assert_eq!(
            found,
            [
                PathBuf::from(format!("/usr/bin/{link}")),
                PathBuf::from(format!("/usr/bin/.debug/{link}")),
                PathBuf::from(format!("/usr/lib/debug/usr/bin/{link}")),
            ]
        );
        assert!(debuglink_candidates("victim", link).is_empty());
        assert!(debuglink_candidates("[vdso]", link).is_empty());
        for bad in ["../../etc/shadow", "", ".", "..", "a/b.debug"] {
            assert!(
                debuglink_candidates("/usr/bin/victim", bad).is_empty(),
                "{bad}"
            );
        }
        for name in ["[vdso]", "bench", "/usr/bin/victim"] {
            let request = DsoRequest {
                name,
                build_id: None,
                buildid_dir: None,
            };
            for candidate in candidates(&request, Some(&[0xab; 20])) {
                assert!(candidate.is_absolute(), "{name}: {}", candidate.display());
            }
        }
    }
}

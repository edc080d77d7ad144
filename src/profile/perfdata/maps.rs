//! User address spaces and the DSOs mapped in them: one space per process, shared by its
//! threads, where a new mapping trims or splits the ones it overlaps; DSOs are shared by name
//! and their symbols loaded on first use.
//!
//! Source: `tools/perf/util/map.c: map__new()` (anon, no-DSO and vdso names),
//! `tools/perf/util/maps.c: maps__fixup_overlappings()`, `maps__clone()`.

use super::elf::{self, DsoRequest};
use super::symtab::SymTab;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// Index of a DSO in [`Dsos`].
pub(crate) type DsoId = u32;

/// Where an MMAP record puts a file: its start address, length and offset in the file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Extent {
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
}

/// A mapping of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UserMap {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    pub dso: DsoId,
    /// Anonymous and no-DSO memory: addresses are not translated (`identity__map_ip`).
    pub identity: bool,
}

impl UserMap {
    /// `map->map_ip`: the address inside the DSO.
    pub fn map_ip(&self, ip: u64) -> u64 {
        if self.identity {
            ip
        } else {
            ip.wrapping_sub(self.start).wrapping_add(self.pgoff)
        }
    }
}

/// One process's mappings, non-overlapping, by start.
#[derive(Debug, Clone, Default)]
pub(crate) struct AddressSpace {
    maps: BTreeMap<u64, UserMap>,
}

impl AddressSpace {
    /// Insert `m`, trimming or splitting what it overlaps (`maps__fixup_overlappings`).
    pub fn insert(&mut self, map: UserMap) {
        let overlapping: Vec<UserMap> = self
            .maps
            .range(..map.end)
            .rev()
            .map(|(_, p)| *p)
            .take_while(|p| p.end > map.start)
            .collect();
        for pos in overlapping {
            self.maps.remove(&pos.start);
            if map.start > pos.start {
                self.maps.insert(
                    pos.start,
                    UserMap {
                        end: map.start,
                        ..pos
                    },
                );
            }
            if map.end < pos.end {
                let pgoff = pos.pgoff.wrapping_add(map.end - pos.start);
                self.maps.insert(
                    map.end,
                    UserMap {
                        start: map.end,
                        pgoff,
                        ..pos
                    },
                );
            }
        }
        self.maps.insert(map.start, map);
    }

    /// Copy every mapping of `parent` in (`maps__clone`, after a fork).
    pub fn clone_from_parent(&mut self, parent: &AddressSpace) {
        for (start, map) in &parent.maps {
            self.maps.insert(*start, *map);
        }
    }

    /// The mapping holding `ip`.
    pub fn find(&self, ip: u64) -> Option<&UserMap> {
        self.maps
            .range(..=ip)
            .next_back()
            .map(|(_, m)| m)
            .filter(|m| ip < m.end)
    }

    /// Number of mappings.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.maps.len()
    }
}

/// What kind of object a DSO is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DsoKind {
    /// A file (or `[vdso]`): ELF symbols.
    Elf,
    /// `/tmp/perf-PID.map`: a JIT's symbol map.
    PerfMap,
    /// Memory without a file: no symbols.
    NoSymbols,
}

#[derive(Debug)]
struct Dso {
    name: String,
    kind: DsoKind,
    symbols: Option<Option<SymTab>>,
}

/// The DSOs of the recording.
#[derive(Debug, Default)]
pub(crate) struct Dsos {
    list: Vec<Dso>,
    by_name: HashMap<String, DsoId>,
    build_ids: HashMap<Vec<u8>, Vec<u8>>,
    buildid_dir: Option<PathBuf>,
    /// Whether to read binaries at all (false: every user symbol is unknown).
    pub load_symbols: bool,
}

/// `is_anon_memory` / `is_no_dso_memory` of `map.h`.
fn anon_or_no_dso(name: &str) -> bool {
    name == "//anon"
        || name.starts_with("/dev/zero")
        || name.starts_with("/anon_hugepage")
        || name.starts_with("[stack")
        || name.starts_with("/SYSV")
        || name == "[heap]"
}

impl Dsos {
    /// DSOs resolved with the recording's build ids (filename → id) and perf's build-id cache.
    pub fn new(build_ids: HashMap<Vec<u8>, Vec<u8>>, buildid_dir: Option<PathBuf>) -> Dsos {
        Dsos {
            build_ids,
            buildid_dir,
            load_symbols: true,
            ..Dsos::default()
        }
    }

    fn findnew(&mut self, name: &str, kind: DsoKind) -> DsoId {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let id = self.list.len() as DsoId;
        self.list.push(Dso {
            name: name.to_string(),
            kind,
            symbols: None,
        });
        self.by_name.insert(name.to_string(), id);
        id
    }

    /// The mapping an MMAP record makes (`map__new`): `pid` names the JIT map of anonymous
    /// executable memory; `exec` is `prot & PROT_EXEC`.
    pub fn map(&mut self, filename: &str, pid: i32, exec: bool, extent: Extent) -> UserMap {
        let Extent { start, len, pgoff } = extent;
        let special = anon_or_no_dso(filename) || filename.starts_with("/anon_hugepage");
        let (name, kind, pgoff) = if special && exec && pid != 0 {
            (format!("/tmp/perf-{pid}.map"), DsoKind::PerfMap, pgoff)
        } else if special {
            (filename.to_string(), DsoKind::NoSymbols, pgoff)
        } else if filename == "[vdso]" {
            (filename.to_string(), DsoKind::Elf, 0)
        } else if filename.starts_with("/tmp/perf-") {
            (filename.to_string(), DsoKind::PerfMap, pgoff)
        } else {
            (filename.to_string(), DsoKind::Elf, pgoff)
        };
        UserMap {
            start,
            end: start.wrapping_add(len),
            pgoff,
            dso: self.findnew(&name, kind),
            identity: special,
        }
    }

    /// Record the build id an MMAP2 carried for `name` (it overrides the header's).
    pub fn set_build_id(&mut self, name: &str, id: &[u8]) {
        self.build_ids.insert(name.as_bytes().to_vec(), id.to_vec());
    }

    /// A DSO's name as perf prints it.
    pub fn name(&self, id: DsoId) -> &str {
        self.list
            .get(id as usize)
            .map_or("[unknown]", |d| d.name.as_str())
    }

    /// The symbol holding `addr` (a DSO-relative address): its name and start.
    pub fn symbol(&mut self, id: DsoId, addr: u64) -> Option<(String, u64)> {
        let loaded = self.load(id)?;
        let sym = loaded.find(addr)?;
        Some((loaded.name(sym).to_string(), sym.start))
    }

    fn load(&mut self, id: DsoId) -> Option<&SymTab> {
        let dso = self.list.get(id as usize)?;
        if dso.symbols.is_none() {
            let tab = match dso.kind {
                _ if !self.load_symbols => None,
                DsoKind::NoSymbols => None,
                DsoKind::PerfMap => elf::load_perf_map(std::path::Path::new(&dso.name)),
                DsoKind::Elf => elf::load_dso(&DsoRequest {
                    name: &dso.name,
                    build_id: self.build_ids.get(dso.name.as_bytes()).map(Vec::as_slice),
                    buildid_dir: self.buildid_dir.as_deref(),
                }),
            };
            self.list.get_mut(id as usize)?.symbols = Some(tab);
        }
        self.list.get(id as usize)?.symbols.as_ref()?.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: u64, end: u64, pgoff: u64, dso: DsoId) -> UserMap {
        UserMap {
            start,
            end,
            pgoff,
            dso,
            identity: false,
        }
    }

    #[test]
    fn overlapping_mappings_are_trimmed_and_split() {
        let mut a = AddressSpace::default();
        a.insert(m(0x1000, 0x5000, 0, 1));
        a.insert(m(0x2000, 0x3000, 0x10, 2));
        let got: Vec<UserMap> = a.maps.values().copied().collect();
        assert_eq!(
            got,
            [
                m(0x1000, 0x2000, 0, 1),
                m(0x2000, 0x3000, 0x10, 2),
                m(0x3000, 0x5000, 0x2000, 1)
            ]
        );
        a.insert(m(0x0, 0x6000, 0, 3));
        assert_eq!(a.len(), 1, "a covering mapping replaces all");
        assert_eq!(a.find(0x5fff).map(|x| x.dso), Some(3));
        assert_eq!(a.find(0x6000), None);
        let mut child = AddressSpace::default();
        child.clone_from_parent(&a);
        assert_eq!(child.find(0x10).map(|x| x.map_ip(0x10)), Some(0x10));
    }

    #[test]
    fn map_names_follow_map_new() {
        let mut d = Dsos::new(HashMap::new(), None);
        let table = [
            ("//anon", 42, true, "/tmp/perf-42.map", true),
            ("//anon", 42, false, "//anon", true),
            ("[heap]", 0, true, "[heap]", true),
            ("[vdso]", 42, true, "[vdso]", false),
            ("/usr/lib/libc.so.6", 42, true, "/usr/lib/libc.so.6", false),
        ];
        for (file, pid, exec, name, identity) in table {
            let extent = Extent {
                start: 0x1000,
                len: 0x1000,
                pgoff: 0x10,
            };
            let um = d.map(file, pid, exec, extent);
            assert_eq!(d.name(um.dso), name, "{file}");
            assert_eq!(um.identity, identity, "{file}");
        }
        assert_eq!(
            d.map(
                "[vdso]",
                1,
                true,
                Extent {
                    start: 0,
                    len: 1,
                    pgoff: 7
                }
            )
            .pgoff,
            0,
            "vdso pgoff is 0"
        );
    }
}

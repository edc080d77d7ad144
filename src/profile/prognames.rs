//! The one owner of "the name to show for this `bpf_prog_` symbol". perf and the kernel name a
//! JIT-ed program `bpf_prog_<tag>_<name>`, where `<name>` is the whole BTF name of the function
//! when the program carries BTF `func_info`, and otherwise the kernel's copy of the program
//! name, cut to 15 bytes (`sys_enter_opena` for bpftrace's `sys_enter_openat` program).
//!
//! A recording keeps each program's name beside perf.data (`perf.data.json`: the full name from
//! BTF, or the kernel's name marked `…` when it was cut), with its tag and the symbols of its
//! functions. A frame is matched to that record by the tag in its symbol, never by the name
//! alone: two programs whose names share their first 15 bytes (opensnoop's four
//! `tracepoint__sys…`) are told apart only by their tags. Without a record of the tag (a
//! perf.data from elsewhere, folded stacks), the kernel's name is kept and marked as cut when
//! it fills the kernel's 15 bytes, as `doctor` marks it.

use crate::bpf::marked_if_cut;
use crate::host::kallsyms::ProgSymbol;
use crate::runrecord::RunRecord;
use std::collections::HashMap;

/// The names a recording knows for its programs' functions, by tag and by program id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramNames {
    by_tag: HashMap<String, String>,
    by_id: HashMap<u32, String>,
}

/// The mark the kernel's cut names carry once shown (`sys_enter_opena…`).
const CUT_MARK: char = '…';

/// The most bytes of a program's name the kernel keeps (`BPF_OBJ_NAME_LEN` less its NUL).
const KERNEL_NAME_BYTES: usize = 15;

/// A name from a symbol marked as cut when it fills the kernel's 15 bytes exactly: a longer one
/// came from BTF and is whole, a shorter one was never cut.
fn marked_if_full(name: &str) -> String {
    match name.len() == KERNEL_NAME_BYTES {
        true => marked_if_cut(name),
        false => name.to_string(),
    }
}

impl ProgramNames {
    /// The names kept by a recording's run record; none without one.
    pub fn from_record(record: Option<&RunRecord>) -> ProgramNames {
        let mut names = ProgramNames::default();
        let Some(record) = record else {
            return names;
        };
        for program in &record.loaded_programs {
            names.by_id.insert(program.id, program.name.clone());
            names
                .by_tag
                .insert(program.tag.clone(), program.name.clone());
            let without_btf = program.name.ends_with(CUT_MARK);
            for symbol in program.functions.iter().skip(1) {
                let Some(parts) = ProgSymbol::parse(symbol) else {
                    continue;
                };
                // A program without BTF names its sub-functions with its own cut name.
                let name = match without_btf {
                    true => marked_if_full(parts.name),
                    false => parts.name.to_string(),
                };
                names.by_tag.entry(parts.tag.to_string()).or_insert(name);
            }
        }
        for seen in &record.bpf_programs {
            // Records written before `loaded_programs` existed hold only the kernel's names.
            names
                .by_tag
                .entry(seen.tag.clone())
                .or_insert_with(|| marked_if_full(&seen.name));
            if let Some(id) = seen.id {
                names
                    .by_id
                    .entry(id)
                    .or_insert_with(|| marked_if_full(&seen.name));
            }
        }
        names
    }

    /// The name to show for a `bpf_prog_<tag>_<name>` symbol: the recording's name for its tag,
    /// else the symbol's name, marked as cut when it fills 15 bytes. `None` for other symbols.
    pub fn of_symbol(&self, symbol: &str) -> Option<String> {
        let parts = ProgSymbol::parse(symbol)?;
        Some(self.of_tag(parts.tag, parts.name))
    }

    /// The name to show for the function of tag `tag` that the kernel or perf named
    /// `kernel_name`.
    pub fn of_tag(&self, tag: &str, kernel_name: &str) -> String {
        match self.by_tag.get(tag) {
            Some(name) => name.clone(),
            None => marked_if_full(kernel_name),
        }
    }

    /// The name to show for program `id` (its main function), when the recording knows it.
    pub fn of_id(&self, id: u32) -> Option<&str> {
        self.by_id.get(&id).map(String::as_str)
    }

    /// The name to show for program `id`, whose `bpf_prog_info.name` is `kernel_name`: the
    /// recording's, else the kernel's marked as cut when it fills 15 bytes.
    pub fn of_program(&self, id: u32, kernel_name: &str) -> String {
        self.of_id(id)
            .map_or_else(|| marked_if_full(kernel_name), str::to_string)
    }

    /// The symbol rewritten with the name to show: `bpf_prog_<tag>_<shown name>`, so that a
    /// frame keeps its tag (flame's labels and report's attribution read it) and shows the
    /// whole name; `None` for other symbols and for those already shown so.
    pub fn renamed(&self, symbol: &str) -> Option<String> {
        let parts = ProgSymbol::parse(symbol)?;
        let shown = self.of_tag(parts.tag, parts.name);
        if shown == parts.name || parts.name.is_empty() {
            return None;
        }
        Some(format!("bpf_prog_{}_{shown}", parts.tag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run record of `fixtures/perf-data/`'s recording, with its programs.
    fn fixture_record() -> RunRecord {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/perf-data/hook-lines.data.json"
        );
        RunRecord::load(std::path::Path::new(path)).expect("the fixture's run record")
    }

    #[test]
    fn a_recorded_tag_gives_the_recorded_name() {
        let names = ProgramNames::from_record(Some(&fixture_record()));
        assert_eq!(
            names
                .of_symbol("bpf_prog_1307ade3162da109_tail_call_security_check")
                .as_deref(),
            Some("tail_call_security_check")
        );
        assert_eq!(
            names
                .of_symbol("bpf_prog_02d72532ae93c2b5_path_check_callback")
                .as_deref(),
            Some("path_check_callback"),
            "a sub-function by its own tag"
        );
        assert_eq!(names.of_id(821), Some("enforce_access_policy"));
        assert_eq!(names.of_symbol("htab_map_hash"), None);
    }

    /// A program without BTF (bpftrace 0.17's): the record holds the kernel's name marked as
    /// cut, and so does every frame of its tag.
    #[test]
    fn a_cut_name_stays_marked_and_is_found_by_tag_only() {
        let mut record = fixture_record();
        record.loaded_programs[0].name = "sys_enter_opena…".into();
        record.loaded_programs[0].tag = "560e29b6a168615e".into();
        let names = ProgramNames::from_record(Some(&record));
        assert_eq!(
            names.renamed("bpf_prog_560e29b6a168615e_sys_enter_opena"),
            Some("bpf_prog_560e29b6a168615e_sys_enter_opena…".into())
        );
        // Another tag with the same 15 bytes is not that program: it keeps its own, cut name.
        assert_eq!(
            names.of_symbol("bpf_prog_0000000000000001_sys_enter_opena"),
            Some("sys_enter_opena…".into())
        );
    }

    /// With BTF the record's whole name replaces a cut one in the symbol, by tag.
    #[test]
    fn a_whole_name_replaces_the_kernels_cut_name() {
        let mut record = fixture_record();
        record.loaded_programs[1].name = "tracepoint__syscalls__sys_enter_openat".into();
        let names = ProgramNames::from_record(Some(&record));
        assert_eq!(
            names.renamed("bpf_prog_1307ade3162da109_tracepoint__sys"),
            Some("bpf_prog_1307ade3162da109_tracepoint__syscalls__sys_enter_openat".into())
        );
    }

    #[test]
    fn without_a_record_fifteen_bytes_are_marked_as_cut() {
        let names = ProgramNames::from_record(None);
        assert_eq!(
            names.of_symbol("bpf_prog_faeb442ee60dc635_tracepoint__sys"),
            Some("tracepoint__sys…".into())
        );
        assert_eq!(
            names.of_symbol("bpf_prog_faeb442ee60dc635_handle_exec"),
            Some("handle_exec".into())
        );
        assert_eq!(
            names.renamed("bpf_prog_faeb442ee60dc635_enforce_access_policy"),
            None,
            "a name longer than 15 bytes is whole"
        );
        let once = names
            .renamed("bpf_prog_faeb442ee60dc635_tracepoint__sys")
            .unwrap();
        assert_eq!(
            names.renamed(&once),
            None,
            "a marked name is not marked again"
        );
        assert_eq!(names.renamed("bpf_prog_faeb442ee60dc635"), None);
    }
}

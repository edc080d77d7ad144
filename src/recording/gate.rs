//! Which loaded BPF programs a recording is for, and whether any would show up in its profile:
//! the one rule `record` applies before it starts perf and `doctor` applies to say whether
//! `record` will run.
//!
//! - With `--load OBJ`, the object's programs are the ones.
//! - Without it, every loaded program of a kind that runs in a benchmark's system calls
//!   (tracing, LSM and socket programs: [`crate::bpf::is_traced_kind`]); device, sysctl, XDP,
//!   tc and struct_ops programs are listed but do not count.
//! - `--filter REGEX` narrows either set to the programs whose name or
//!   `bpf_prog_<tag>_<name>` symbol (or a sub-function's) it matches.
//!
//! The recording is refused only when no program is left: then nothing of BPF would show up.

use crate::bpf::InventoryProgram;

/// What the gate decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict<'a> {
    /// These programs will show up (at least one).
    Programs(Vec<&'a InventoryProgram>),
    /// None would: why, in one line that says what to do.
    Refused(String),
}

/// Apply the rule to `all` (every loaded program), for the object with program ids `object`
/// when one is loaded, narrowed by `filter` when given.
pub fn decide<'a>(
    all: &'a [InventoryProgram],
    object: Option<&[u32]>,
    filter: Option<&regex::Regex>,
) -> Verdict<'a> {
    let candidates: Vec<&InventoryProgram> = all
        .iter()
        .filter(|p| object.map_or(p.traced_kind, |ids| ids.contains(&p.id)))
        .collect();
    let shown: Vec<&InventoryProgram> = candidates
        .iter()
        .copied()
        .filter(|p| filter.is_none_or(|f| matches(f, p)))
        .collect();
    if !shown.is_empty() {
        return Verdict::Programs(shown);
    }
    Verdict::Refused(refusal(all, &candidates, object.is_some(), filter))
}

/// The second refusal, once the JIT sysctls are on (`net.core.bpf_jit_kallsyms=1`): none of
/// the programs that would show up has a `bpf_prog_` symbol listed in /proc/kallsyms, so perf
/// could name none of them (hardened JIT, or programs that were never JIT-ed).
pub fn unnamed(shown: &[&InventoryProgram]) -> Option<String> {
    (!shown.is_empty() && shown.iter().all(|p| p.functions.is_empty())).then(|| {
        "none of the programs has a bpf_prog_ symbol in /proc/kallsyms, so perf cannot name any: set net.core.bpf_jit_harden=0 (sudo sysctl -w net.core.bpf_jit_harden=0) and check the JIT is on".to_string()
    })
}

/// Whether `filter` matches the program's name, its symbol or one of its functions' symbols.
pub fn matches(filter: &regex::Regex, p: &InventoryProgram) -> bool {
    filter.is_match(&p.name)
        || filter.is_match(&format!("bpf_prog_{}_{}", p.tag, p.name))
        || p.functions.iter().any(|f| filter.is_match(f))
}

fn refusal(
    all: &[InventoryProgram],
    candidates: &[&InventoryProgram],
    with_object: bool,
    filter: Option<&regex::Regex>,
) -> String {
    if let (Some(f), false) = (filter, candidates.is_empty()) {
        let names: Vec<&str> = candidates.iter().map(|p| p.name.as_str()).collect();
        let whose = if with_object {
            "the loaded object's programs"
        } else {
            "the loaded tracing, LSM and socket programs"
        };
        return format!(
            "--filter /{}/ matches none of {whose} ({}): widen it, or drop --filter to take them all (--allow-no-bpf records anyway)",
            f.as_str(),
            names.join(", ")
        );
    }
    if with_object {
        return "the loaded object has no program: give an object with at least one SEC(\"…\") program".into();
    }
    let others = if all.is_empty() {
        "no BPF program is loaded".to_string()
    } else {
        let kinds: Vec<String> = all
            .iter()
            .map(|p| format!("{} ({})", p.name, p.prog_type))
            .collect();
        format!(
            "none of the {} loaded BPF programs is a tracing, LSM or socket program, the kinds that run in a benchmark's system calls: {}",
            all.len(),
            kinds.join(", ")
        )
    };
    format!("{others}: load your hook first (sudo ebpf-prof hook --load OBJ.bpf.o, or your agent), or pass --load OBJ.bpf.o, or --allow-no-bpf to record anyway")
}

/// One line for a program that will show up: symbol, id, type and attach point.
pub fn describe(p: &InventoryProgram) -> String {
    let sym = p
        .symbol
        .clone()
        .unwrap_or_else(|| format!("bpf_prog_{}_{} (no symbol yet)", p.tag, p.name));
    let attach = match (&p.attach, &p.loaded_for) {
        (Some(a), _) => format!("attached to {a}"),
        (None, Some(target)) => format!(
            "loaded for {target}, {}",
            crate::bpf::attachments::nowhere(&p.prog_type).trim_start_matches("loaded, ")
        ),
        (None, None) => crate::bpf::attachments::nowhere(&p.prog_type).to_string(),
    };
    let mut subs = p.functions.iter().skip(1).map(|f| short(f)).peekable();
    let subs = if subs.peek().is_some() {
        format!("; sub-functions {}", subs.collect::<Vec<_>>().join(", "))
    } else {
        String::new()
    };
    format!("{sym}: id {}, {}, {attach}{subs}", p.id, p.prog_type)
}

fn short(symbol: &str) -> &str {
    crate::host::kallsyms::split_bpf_symbol(symbol)
        .map_or(symbol, |(_, n)| &symbol[symbol.len() - n.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog(id: u32, name: &str, kind: &str) -> InventoryProgram {
        InventoryProgram {
            id,
            name: name.into(),
            tag: format!("{id:016x}"),
            prog_type: kind.into(),
            attach: None,
            attach_points: vec![],
            attached: true,
            loaded_for: None,
            symbol: Some(format!("bpf_prog_{id:016x}_{name}")),
            functions: vec![format!("bpf_prog_{id:016x}_{name}")],
            traced_kind: crate::bpf::is_traced_kind(kind),
            run_cnt: None,
            mean_run_ns: None,
            map_ids: vec![],
        }
    }

    fn names(v: Verdict<'_>) -> Vec<String> {
        match v {
            Verdict::Programs(p) => p.iter().map(|p| p.name.clone()).collect(),
            Verdict::Refused(why) => panic!("refused: {why}"),
        }
    }

    fn refused(v: Verdict<'_>) -> String {
        match v {
            Verdict::Refused(why) => why,
            Verdict::Programs(p) => panic!("accepted {p:?}"),
        }
    }

    fn re(s: &str) -> regex::Regex {
        regex::Regex::new(s).unwrap()
    }

    #[test]
    fn any_tracing_program_counts_without_the_writeups_grep() {
        // A raw_syscalls hook: on_enter/on_exit match nothing of security|path|file|open.
        let all = [
            prog(1, "sd_devices", "cgroup_device"),
            prog(2, "on_enter", "raw_tracepoint"),
            prog(3, "on_exit", "tracepoint"),
        ];
        assert_eq!(names(decide(&all, None, None)), ["on_enter", "on_exit"]);
        assert_eq!(names(decide(&all, None, Some(&re("exit")))), ["on_exit"]);
    }

    #[test]
    fn the_filter_narrows_an_object_too() {
        let all = [
            prog(7, "count_syscall", "tracepoint"),
            prog(8, "other", "lsm"),
        ];
        assert_eq!(names(decide(&all, Some(&[7]), None)), ["count_syscall"]);
        let why = refused(decide(&all, Some(&[7]), Some(&re("zzz_nomatch"))));
        assert!(why.starts_with("--filter /zzz_nomatch/ matches none of the loaded object's programs (count_syscall)"), "{why}");
    }

    #[test]
    fn sub_function_symbols_match_the_filter() {
        let mut p = prog(4, "enforce_access_policy", "tracepoint");
        p.functions
            .push("bpf_prog_abb7fedfb7f3aa07_path_check_callback".into());
        let all = [p];
        assert_eq!(names(decide(&all, None, Some(&re("path_check")))).len(), 1);
    }

    #[test]
    fn refusals_say_what_was_found() {
        let why = refused(decide(&[], None, None));
        assert!(
            why.starts_with("no BPF program is loaded: load your hook first"),
            "{why}"
        );
        let all = [prog(1, "sd_devices", "cgroup_device")];
        let why = refused(decide(&all, None, None));
        assert!(why.contains("sd_devices (cgroup_device)"), "{why}");
    }

    #[test]
    fn descriptions_name_the_attach_point_and_sub_functions() {
        let mut p = prog(10228, "tail_call_security_check", "tracepoint");
        p.attach = Some("tracepoint sys_enter_openat".into());
        p.functions
            .push("bpf_prog_abb7fedfb7f3aa07_path_check_callback".into());
        let d = describe(&p);
        assert!(d.ends_with("id 10228, tracepoint, attached to tracepoint sys_enter_openat; sub-functions path_check_callback"), "{d}");
        p.attached = false;
        p.attach = None;
        assert!(
            describe(&p).ends_with(
                "tracepoint, loaded, attached nowhere; sub-functions path_check_callback"
            ),
            "{}",
            describe(&p)
        );
        p.prog_type = "lsm".into();
        p.loaded_for = Some("lsm bpf_lsm_file_open".into());
        assert!(
            describe(&p).contains("lsm, loaded for lsm bpf_lsm_file_open, attached nowhere"),
            "{}",
            describe(&p)
        );
        p.prog_type = "xdp".into();
        p.loaded_for = None;
        assert!(
            describe(&p).contains("attached nowhere (no interface of any network namespace"),
            "{}",
            describe(&p)
        );
    }
}

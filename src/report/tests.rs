//! `report` on the folded fixtures in `fixtures/folded/` (see the README there for how each was
//! recorded): the own call graph of the reference (README.md, "The reference"), and real profiles
//! of the sample hook.

use super::*;
use crate::host::kallsyms::parse;

const REFERENCE: &str = include_str!("../../fixtures/folded/reference.folded");
const SAMPLE_HOOK: &str = include_str!("../../fixtures/folded/sample-hook.folded");
const SAMPLE_HOOK_RUN: &str = include_str!("../../fixtures/folded/sample-hook.folded.json");
const TWO_PROGRAMS: &str = include_str!("../../fixtures/folded/two-programs.folded");
const TWO_PROGRAMS_RUN: &str = include_str!("../../fixtures/folded/two-programs.folded.json");
const UNRESOLVED: &str = include_str!("../../fixtures/folded/unresolved-addrs.folded");
const UNRESOLVED_SNAP: &str =
    include_str!("../../fixtures/folded/unresolved-addrs.folded.kallsyms");
const EVERY_SYSCALL: &str = include_str!("../../fixtures/folded/every-syscall.folded");
const EVERY_SYSCALL_RUN: &str = include_str!("../../fixtures/folded/every-syscall.folded.json");
const NO_BPF: &str = include_str!("../../fixtures/folded/no-bpf.folded");
const NO_BPF_RUN: &str = include_str!("../../fixtures/folded/no-bpf.folded.json");

fn run(json: &str) -> RunRecord {
    serde_json::from_str(json).unwrap()
}

fn report(folded: &str, record: Option<&RunRecord>, snap: Option<&str>) -> Report {
    let syms = snap.map(parse);
    build(&Input {
        name: "fixture".into(),
        stacks: &Stacks::parse(folded).unwrap(),
        record,
        kallsyms: syms.as_deref(),
        kernel_symbols_note: None,
        top: 20,
        own_code_line: None,
        counted: None,
        event: None,
    })
}

fn kfunc<'a>(r: &'a Report, name: &str) -> &'a KernelFunction {
    r.kernel_functions
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("{name} not in {:#?}", r.kernel_functions))
}

fn program<'a>(r: &'a Report, name: &str) -> &'a Program {
    r.programs
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("{name} not in {:#?}", r.programs))
}

#[test]
fn reference_call_graph_gives_back_its_figures() {
    let r = report(REFERENCE, None, None);
    assert_eq!(
        (r.samples, r.samples_source),
        (Some(10000), SamplesSource::FoldedCounts)
    );
    let a = &r.attach_points[0];
    assert_eq!(a.name, "bpf_lsm_file_open");
    assert_eq!(a.percent, 89.78);
    let parent = a.parent.as_ref().unwrap();
    assert_eq!(
        (parent.name.as_str(), parent.percent),
        ("do_dentry_open", 90.52)
    );
    assert!((99.0..99.5).contains(&parent.hook_share), "{parent:?}");
    assert_eq!(a.via, ["0xffffffffc0288c18"]);
    assert_eq!(kfunc(&r, "bpf_probe_read_kernel").percent, 29.94);
    assert_eq!(kfunc(&r, "htab_map_hash").percent, 4.88);
    assert_eq!(kfunc(&r, "copy_from_kernel_nofault").percent, 21.17);
    assert_eq!(r.unresolved.len(), 1, "{:#?}", r.unresolved);
    let u = &r.unresolved[0];
    assert_eq!(
        (u.frame.as_str(), u.role, u.parent.as_str()),
        ("0xffffffffc0288c18", Role::Glue, "bpf_lsm_file_open")
    );
    assert_eq!((r.bpf.percent, r.bpf.programs_percent), (89.3, 87.4));
}

#[test]
fn reference_programs_nest_by_stack_position() {
    let r = report(REFERENCE, None, None);
    assert_eq!(r.programs.len(), 1);
    let p = program(&r, "tail_call_security_check");
    let f: Vec<(&str, Option<usize>, f64)> = p
        .functions
        .iter()
        .map(|f| (f.name.as_str(), f.depth, f.percent))
        .collect();
    assert_eq!(
        f,
        [
            ("tail_call_security_check", Some(0), 87.4),
            ("enforce_access_policy", Some(1), 77.57),
            ("path_check_callback", Some(2), 57.87)
        ]
    );
    let text = r.to_text();
    assert!(
        text.contains("89.3% of the samples are inside BPF programs"),
        "{text}"
    );
    assert!(
        text.contains("bpf_lsm_file_open holds 99.2% of it"),
        "{text}"
    );
}

#[test]
fn reference_trampoline_is_named_by_a_snapshot_that_has_it() {
    // /proc/kallsyms lists trampolines as `ADDR t bpf_trampoline_<key> [bpf]`.
    let snap = "ffffffffc0288c18 t bpf_trampoline_6442491220\t[bpf]\n";
    let r = report(REFERENCE, None, Some(snap));
    assert!(r.unresolved.is_empty(), "{:#?}", r.unresolved);
    assert_eq!(r.resolved.len(), 1);
    assert_eq!(
        r.resolved[0].symbol.as_deref(),
        Some("bpf_trampoline_6442491220")
    );
    assert_eq!(r.attach_points[0].name, "bpf_lsm_file_open");
    assert_eq!(r.attach_points[0].via, ["bpf_trampoline_6442491220"]);
    assert_eq!(r.bpf.percent, 89.3);
}

#[test]
fn tail_call_and_sub_function_in_a_real_profile() {
    let rec = run(SAMPLE_HOOK_RUN);
    let r = report(SAMPLE_HOOK, Some(&rec), None);
    assert_eq!(r.samples_source, SamplesSource::PerfRecord);
    assert_eq!(r.count_unit, "ns");
    let entry = program(&r, "enforce_access_policy");
    let sub = &entry.functions[1];
    assert_eq!(
        (sub.name.as_str(), sub.depth, sub.called_from.as_deref()),
        (
            "path_check_callback",
            Some(1),
            Some("enforce_access_policy")
        )
    );
    // The attached program tail-calls at once: it shows on its own under trace_call_bpf, and
    // its target takes its place there.
    let caller = program(&r, "tail_call_security_check");
    assert_eq!(caller.id, Some(421), "id from the run record");
    let tp = r
        .attach_points
        .iter()
        .find(|a| a.name == "trace_call_bpf")
        .unwrap();
    assert_eq!(
        tp.programs,
        ["enforce_access_policy", "tail_call_security_check"]
    );
    assert_eq!(tp.parent.as_ref().unwrap().name, "perf_call_bpf_enter");
    assert!(
        caller
            .attach_points
            .contains(&walk::CALLER_LOST.to_string()),
        "{caller:#?}"
    );
    assert!(r.bpf.percent > entry.percent && entry.percent > sub.self_percent);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn two_programs_on_one_attach_point() {
    let rec = run(TWO_PROGRAMS_RUN);
    let r = report(TWO_PROGRAMS, Some(&rec), None);
    let tp = r
        .attach_points
        .iter()
        .find(|a| a.name == "trace_call_bpf")
        .unwrap();
    for p in ["count_opens", "enforce_access_policy", "lookups_2"] {
        assert!(tp.programs.contains(&p.to_string()), "{p} in {tp:#?}");
    }
    let comm = kfunc(&r, "bpf_get_current_comm");
    assert_eq!(comm.called_from[0].name, "count_opens");
    assert_eq!(program(&r, "enforce_access_policy").id, Some(468));
    // A program loaded by someone else during the recording: perf has no name for it.
    let u = r
        .unresolved
        .iter()
        .find(|u| u.frame == "[unknown]")
        .unwrap();
    assert_eq!(
        (u.role, u.parent.as_str()),
        (Role::UnderRunner, "trace_call_bpf")
    );
    assert!(r.bpf.unresolved_under_runners_percent > 0.0);
    let text = r.to_text();
    assert!(
        text.contains("probably a BPF program perf could not name"),
        "{text}"
    );
}

#[test]
fn bare_addresses_are_named_from_the_snapshot_where_it_can() {
    let unnamed = report(UNRESOLVED, None, None);
    assert_eq!(unnamed.bpf.percent, 0.0);
    assert!(unnamed.bpf.unresolved_under_runners_percent > 30.0);
    assert!(unnamed
        .warnings
        .iter()
        .any(|w| w.contains("could not name")));

    let r = report(UNRESOLVED, None, Some(UNRESOLVED_SNAP));
    let p = program(&r, "enforce_access_policy");
    assert_eq!(p.functions[1].name, "path_check_callback");
    assert!(r
        .resolved
        .iter()
        .any(|o| o.frame == "[unknown <ffffffffc0025cd2>]"
            && o.symbol.as_deref() == Some("bpf_prog_ced0c9407c526ed9_enforce_access_policy")));
    // Past the last [bpf] symbol the snapshot cannot say where a program ends: left unresolved.
    let u = r
        .unresolved
        .iter()
        .find(|u| u.frame == "[unknown <ffffffffc0025fc1>]")
        .unwrap();
    assert_eq!(u.role, Role::UnderRunner);
    assert_eq!(
        u.nearest.as_deref(),
        Some("bpf_prog_1307ade3162da109_tail_call_security_check+0x45")
    );
    assert!(kfunc(&r, "bpf_probe_read_user_str").percent > 0.0);
}

#[test]
fn a_profile_without_bpf_says_so_and_nothing_else() {
    let rec = run(NO_BPF_RUN);
    let r = report(NO_BPF, Some(&rec), None);
    assert_eq!(r.bpf.percent, 0.0);
    assert!(r.programs.is_empty() && r.attach_points.is_empty() && r.hints.is_empty());
    assert!(r.kernel_functions.is_empty() && r.unresolved.is_empty());
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].starts_with("no sampled stack passes through a BPF program"));
}

#[test]
fn too_few_samples_in_bpf_warns_and_scales_the_iterations() {
    let mut rec = run(SAMPLE_HOOK_RUN);
    rec.perf_samples = Some(200);
    let r = report(SAMPLE_HOOK, Some(&rec), None);
    let n = r.bpf.samples.unwrap();
    assert!(n < MIN_BPF_SAMPLES);
    let factor = MIN_BPF_SAMPLES.div_ceil(n);
    let w = r
        .warnings
        .iter()
        .find(|w| w.contains("fewer than 400"))
        .unwrap();
    assert!(w.contains(&format!("-n {}", 200_000 * factor)), "{w}");
    assert!(r.hints.is_empty(), "no hint on too few samples");
    assert!(r
        .to_text()
        .contains("too few samples inside BPF for a hint"));
}

#[test]
fn a_sub_function_sampled_in_its_prologue_stays_with_its_program() {
    let f =
        "b;trace_call_bpf_[k];bpf_prog_1111111111111111_main;bpf_prog_2222222222222222_sub 90\n\
             b;trace_call_bpf_[k];bpf_prog_2222222222222222_sub 3\n";
    let r = report(f, None, None);
    assert_eq!(r.programs.len(), 1);
    let p = program(&r, "main");
    assert_eq!(p.percent, 100.0);
    let sub = &p.functions[1];
    assert_eq!((sub.name.as_str(), sub.depth), ("sub", Some(1)));
    assert_eq!(sub.unwound_short_percent, 3.23);
    assert_eq!(p.tags, ["1111111111111111"]);
}

#[test]
fn json_holds_the_same_content() {
    let r = report(REFERENCE, None, None);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["attach_points"][0]["parent"]["name"], "do_dentry_open");
    assert_eq!(v["bpf"]["percent"], 89.3);
    assert_eq!(v["unresolved"][0]["role"], "glue");
    assert_eq!(v["hints"][0]["category"], "probe_read");
    assert_eq!(v["samples_source"], "folded_counts");
}

#[test]
fn reference_hints_lead_to_the_write_ups_conclusion_in_order() {
    // "That shape points at fewer probe reads or a cache in front of the map, not at
    // micro-tuning the verifier-visible instruction count."
    let r = report(REFERENCE, None, None);
    let cats: Vec<Category> = r.hints.iter().map(|h| h.category).collect();
    assert_eq!(
        cats,
        [Category::ProbeRead, Category::MapHash],
        "{:#?}",
        r.hints
    );
    assert!(
        r.hints[0].text.contains("fewer probe reads"),
        "{}",
        r.hints[0].text
    );
    assert!(
        r.hints[1].text.contains("a cache in front of the map"),
        "{}",
        r.hints[1].text
    );
    // The excerpt's unlisted children are not the programs' own code.
    let p = program(&r, "tail_call_security_check");
    assert!(p.functions.iter().all(|f| f.self_percent == 0.0), "{p:#?}");
}

#[test]
fn a_programs_self_time_excludes_its_sub_functions() {
    let f =
        "b;trace_call_bpf_[k];bpf_prog_1111111111111111_main;bpf_prog_2222222222222222_sub 60\n\
             b;trace_call_bpf_[k];bpf_prog_1111111111111111_main 30\n\
             b;trace_call_bpf_[k];bpf_prog_1111111111111111_main;bpf_map_lookup_elem_[k] 10\n";
    let r = report(f, None, None);
    let p = program(&r, "main");
    assert_eq!((p.percent, p.self_percent), (100.0, 30.0));
    let sub = p.functions.iter().find(|f| f.name == "sub").unwrap();
    assert_eq!(sub.self_percent, 60.0);
    let entry = p.functions.iter().find(|f| f.name == "main").unwrap();
    assert_eq!(entry.self_percent, 30.0);
}

#[test]
fn allocation_under_map_updates_is_named_with_its_hint() {
    // A syscount-shaped hook (fixtures/hooks/every_syscall.bpf.c): BPF_F_NO_PREALLOC hash map,
    // updated on every sys_enter, deleted on every sys_exit.
    let rec = run(EVERY_SYSCALL_RUN);
    let r = report(EVERY_SYSCALL, Some(&rec), None);
    let alloc = r
        .hints
        .iter()
        .find(|h| h.category == Category::Alloc)
        .unwrap_or_else(|| panic!("{:#?}", r.hints));
    assert!(
        alloc.text.contains("drop BPF_F_NO_PREALLOC"),
        "{}",
        alloc.text
    );
    assert!(alloc.text.contains("per-CPU"), "{}", alloc.text);
    assert_eq!(kfunc(&r, "free_htab_elem").category, Some(Category::Alloc));
    let pos = |c| r.hints.iter().position(|h| h.category == c);
    assert!(
        pos(Category::Alloc) < pos(Category::MapAccess),
        "{:#?}",
        r.hints
    );
}

#[test]
fn allocation_under_an_in_place_update_is_named_without_any_delete() {
    // The profile (upstream syscount: BPF_F_NO_PREALLOC, the same key updated on every
    // sys_enter, never deleted): the update allocates the new element and frees the old one,
    // both under htab_map_update_elem. Debian's build preallocates and shows neither
    // (tests/real_tools.rs).
    let stack = "b;perf_trace_sys_enter_[k];trace_call_bpf_[k];bpf_prog_1111111111111111_sys_enter";
    let f = format!(
        "{stack};htab_map_update_elem_[k];free_htab_elem_[k];unit_free_[k] 300\n\
         {stack};htab_map_update_elem_[k];alloc_htab_elem_[k];bpf_mem_cache_alloc_[k] 200\n\
         {stack};htab_map_update_elem_[k] 400\n\
         {stack} 100\n"
    );
    let r = report(&f, None, None);
    assert_eq!(kfunc(&r, "unit_free").category, Some(Category::Alloc));
    assert_eq!(kfunc(&r, "alloc_htab_elem").category, Some(Category::Alloc));
    let alloc = r.hints.iter().find(|h| h.category == Category::Alloc);
    let alloc = alloc.unwrap_or_else(|| panic!("{:#?}", r.hints));
    assert!((alloc.share_of_bpf - 50.0).abs() < 1e-9, "{alloc:?}");
    assert!(alloc.text.contains("preallocate") && alloc.text.contains("per-CPU"));
    assert_eq!(r.hints[0].category, Category::Alloc, "{:#?}", r.hints);
}

#[test]
fn an_attach_points_share_of_its_ancestors_never_passes_100() {
    // The hook runs under sys_enter and sys_exit: trace_call_bpf weighs more than either
    // perf_trace_sys_enter or perf_trace_sys_exit.
    let rec = run(EVERY_SYSCALL_RUN);
    let r = report(EVERY_SYSCALL, Some(&rec), None);
    for a in &r.attach_points {
        for anc in [&a.parent, &a.grandparent].into_iter().flatten() {
            assert!(
                anc.hook_share <= 100.0,
                "{} in {}: {anc:?}",
                a.name,
                anc.name
            );
        }
    }
    let f = "b;perf_trace_sys_enter_[k];trace_call_bpf_[k];bpf_prog_1111111111111111_p 40\n\
             b;perf_trace_sys_enter_[k];other_[k] 10\n\
             b;perf_trace_sys_exit_[k];trace_call_bpf_[k];bpf_prog_1111111111111111_p 45\n";
    let r = report(f, None, None);
    let p = r.attach_points[0].parent.as_ref().unwrap();
    assert_eq!(
        (p.name.as_str(), p.hook_share),
        ("perf_trace_sys_exit", 100.0)
    );
    let r = report(&f.replace(" 45", " 30"), None, None);
    let p = r.attach_points[0].parent.as_ref().unwrap();
    assert_eq!(
        (p.name.as_str(), p.hook_share),
        ("perf_trace_sys_enter", 80.0)
    );
}

/// Each run parses its input once: loading a folded file or `perf script` text parses it, a
/// perf.data is not parsed as text at all, and the report, the flame graphs, the exports and
/// `--folded` are all made from the loaded stacks.
#[test]
fn a_run_parses_its_input_once() {
    use crate::profile::stacks::PARSES;
    let fixture = |name: &str| {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name)
    };
    let inputs = [
        ("folded/sample-hook.folded", 1),
        ("perf-script/openat-hook.txt", 1),
        ("perf-data/hook-lines.data", 0),
    ];
    for (name, parses) in inputs {
        PARSES.with(|count| count.set(0));
        let path = fixture(name);
        let p = crate::profile::load(&path, None, &Default::default()).unwrap();
        assert!(report_on(&p, &path, 5, None).unwrap().total_weight > 0);
        let opts = crate::flame::FlameOptions::default();
        crate::flame::render(&p.stacks, &opts, Vec::new()).unwrap();
        crate::flame::render(&filter::bpf_only(&p.stacks), &opts, Vec::new()).unwrap();
        crate::flame::render_diff(&p.stacks, &p.stacks, "t", "samples", Vec::new()).unwrap();
        let weights = crate::flame::export::Weights {
            unit: "ns",
            per_stack: p.sampled.per_stack.as_deref(),
        };
        crate::flame::export::pprof(&p.stacks, &weights, "t").unwrap();
        crate::flame::export::speedscope(&p.stacks, "ns", "t").unwrap();
        assert!(!delta::deltas(&p.stacks, &p.stacks).is_empty());
        assert!(!p.stacks.to_text().is_empty());
        assert_eq!(PARSES.with(|count| count.get()), parses, "{name}");
    }
}

#[test]
fn a_tail_call_target_with_sub_functions_is_found_attached_nowhere_by_its_name() {
    // The sample hook's entry program carries its first function's tag in the profile
    // (e03e…), not its program tag (ced0…): the run record's program list is matched by name.
    let mut v: serde_json::Value = serde_json::from_str(SAMPLE_HOOK_RUN).unwrap();
    let listed = |name: &str, tag: &str, attached: bool| {
        serde_json::json!({"id": 1, "name": name, "tag": tag, "type": "tracepoint",
            "attach": null, "attach_points": [], "attached": attached,
            "symbol": format!("bpf_prog_{tag}_{name}"), "functions": [],
            "traced_kind": true, "run_cnt": null, "mean_run_ns": null, "map_ids": []})
    };
    v["loaded_programs"] = serde_json::json!([
        listed("enforce_access_policy", "ced0c9407c526ed9", false),
        listed("tail_call_security_check", "1307ade3162da109", true),
    ]);
    let rec: RunRecord = serde_json::from_value(v).unwrap();
    let r = report(SAMPLE_HOOK, Some(&rec), None);
    let tp = r
        .attach_points
        .iter()
        .find(|a| a.name == "trace_call_bpf")
        .unwrap();
    assert_eq!(
        tp.attached_nowhere.as_deref(),
        Some(&["enforce_access_policy".to_string()][..])
    );
    assert!(r
        .to_text()
        .contains("enforce_access_policy attached nowhere, so entered by a tail call"));
}

/// Real recordings of `record --load KIND_8.bpf.o` over udp-veth, one per packet kind
/// (fixtures/folded/README.md): each names its program and reads its hook right, whatever the
/// nearest frame above the program is.
#[test]
fn packet_programs_are_named_and_their_hooks_read_from_the_callers() {
    use super::hooks::PacketHook;
    let cases = [
        (
            include_str!("../../fixtures/folded/packet-xdp.folded"),
            "xdp_8",
            PacketHook::XdpNative,
            "veth_xdp_rcv_skb",
        ),
        (
            include_str!("../../fixtures/folded/packet-tc.folded"),
            "tc_8",
            PacketHook::TcIngress,
            "cls_bpf_classify",
        ),
        (
            include_str!("../../fixtures/folded/packet-tcx.folded"),
            "tcx_8",
            PacketHook::TcxIngress,
            "__netif_receive_skb_core.constprop.0",
        ),
        (
            include_str!("../../fixtures/folded/packet-cgroup-skb.folded"),
            "cgroup_skb_8",
            PacketHook::CgroupSkbEgress,
            "__bpf_prog_run_save_cb",
        ),
        (
            include_str!("../../fixtures/folded/packet-socket.folded"),
            "socket_8",
            PacketHook::SocketFilter,
            "sk_filter_trim_cap",
        ),
    ];
    for (folded, name, hook, attach) in cases {
        let r = report(folded, None, None);
        assert!(program(&r, name).percent > 0.0, "{name}");
        assert_eq!(r.packet_hooks.len(), 1, "{name}: {:#?}", r.packet_hooks);
        let h = &r.packet_hooks[0];
        assert_eq!(h.hook, hook, "{name}");
        assert!(h.attach_points.iter().any(|a| a == attach), "{name}: {h:?}");
        // Every stack through the program is under its hook, but those whose kernel call
        // chain stops at the program (sampled in its prologue: no caller to read).
        let lost: f64 = r
            .attach_points
            .iter()
            .filter(|a| a.name == walk::CALLER_LOST)
            .map(|a| a.bpf_percent)
            .sum();
        let within = h.bpf_percent + lost >= program(&r, name).percent - 1e-6;
        assert!(within, "{name}: {h:?}, {lost}% lost");
        text_names(&r, hook);
    }
}

/// The report's text lists the hook in its own section.
fn text_names(r: &Report, hook: super::hooks::PacketHook) {
    let text = r.to_text();
    assert!(
        text.contains("packet hooks (the attach points read from their callers)"),
        "{text}"
    );
    assert!(text.contains(hook.describe()), "{text}");
}

/// The tc program's samples that lost cls_bpf_classify are the same hook, not another.
#[test]
fn a_tc_program_entered_from_two_frames_is_one_hook() {
    let tc = report(
        include_str!("../../fixtures/folded/packet-tc.folded"),
        None,
        None,
    );
    assert_eq!(
        tc.packet_hooks[0].attach_points,
        ["__tcf_classify.constprop.0", "cls_bpf_classify"]
    );
}

#[test]
fn hooks_off_the_packet_path_give_no_packet_hook() {
    for folded in [SAMPLE_HOOK, TWO_PROGRAMS, EVERY_SYSCALL, NO_BPF, REFERENCE] {
        assert!(report(folded, None, None).packet_hooks.is_empty());
    }
}

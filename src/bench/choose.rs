//! `--op auto`: the operation whose timed span fires a hook's programs, from where they attach.
//!
//! An attach point is read as libbpf names it in an object's ELF section
//! (`tracepoint/syscalls/sys_enter_execve`, `tp/…`, `raw_tracepoint/sys_enter`, `lsm/file_open`,
//! `fentry/vfs_read`, `kprobe/…`, `ksyscall/…`, `cgroup/connect4`, `sockops`, …) or as the
//! kernel's link names it for a program someone else loaded (`tracepoint
//! syscalls/sys_enter_execve`, `lsm bpf_lsm_file_open`, `tracing vfs_read`, `cgroup id 1
//! (CgroupInet4Connect)`). Each point is looked up in the catalogue of operation.rs; the
//! operation firing the most of the object's programs wins, ties going to the catalogue's order
//! (openat first). Pure: no object or kernel is read here.

use super::operation::Operation;
use crate::error::usage;
use serde::Serialize;
use std::ffi::OsString;

/// How the operation was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpChoice {
    /// `--op NAME`: the user's.
    Given,
    /// `--op auto`: from the object's attach points.
    Auto,
    /// No `--op`: as `auto`.
    Default,
}

/// Where one program's attach point is reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum Fires {
    /// Inside the timed span of these operations (catalogue order).
    Inside(Vec<Operation>),
    /// On every system call: inside any operation's span.
    Every,
    /// By a system call the loops make outside their spans (`close`, `wait4`, …).
    Outside(String),
    /// Nowhere the loops go, and why.
    Nowhere(String),
    /// No attach target in its section (a tail-call target): runs when what calls it runs.
    Unattached,
    /// A loaded program that nothing attaches (no link, perf event or cgroup holds it): no
    /// event runs it, as syscount's `sys_enter` when not asked for latencies.
    AttachedNowhere,
}

impl Fires {
    /// Whether `op` fires it inside its span.
    pub fn inside(&self, op: Operation) -> bool {
        match self {
            Fires::Inside(ops) => ops.contains(&op),
            Fires::Every => true,
            _ => false,
        }
    }

    /// Whether it names a point at all (not a tail-call target, not attached nowhere).
    pub fn has_point(&self) -> bool {
        !matches!(self, Fires::Unattached | Fires::AttachedNowhere)
    }
}

/// One program and where its attach point is reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgramReach {
    pub program: String,
    /// Its attach point as read (section name or link description).
    pub point: String,
    pub fires: Fires,
}

/// The operation chosen for a hook, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Chosen {
    pub op: Operation,
    pub by: OpChoice,
    /// The programs `op` fires inside its span (by name).
    pub fired: Vec<String>,
    /// Every program with where it is reached.
    pub programs: Vec<ProgramReach>,
    /// One sentence: what was chosen and why, or that no operation fires the programs.
    pub why: String,
}

impl Chosen {
    /// Whether `op` fires none of the programs that have an attach point of their own.
    pub fn fires_nothing(&self) -> bool {
        self.fired.is_empty() && self.programs.iter().any(|p| p.fires.has_point())
    }

    /// The line to say at the start: why, a warning when the `--op` given fires nothing.
    pub fn line(&self) -> String {
        if self.by == OpChoice::Given && self.fires_nothing() {
            format!("warning: {}", self.why)
        } else {
            self.why.clone()
        }
    }
}

/// `--op` given with a benchmark of one's own (`command`, empty for the built-in one): refused,
/// that benchmark makes its own operation.
pub fn refuse_op_with_own_bench(
    by: OpChoice,
    op: Operation,
    command: &[OsString],
) -> anyhow::Result<()> {
    let Some(own) = command.first() else {
        return Ok(());
    };
    if by == OpChoice::Default {
        return Ok(());
    }
    Err(usage(format!(
        "--op is for the built-in bench: your benchmark ({}) makes its own operation; drop --op (or drop the benchmark to time --op {op})",
        own.to_string_lossy()
    )))
}

/// Where `point` (a section name or a link's description) is reached.
pub fn fires(point: &str) -> Fires {
    if point.trim().is_empty() {
        return Fires::AttachedNowhere;
    }
    let (kind, target) = split(point);
    if target.is_empty() && is_tracing_kind(kind) {
        return Fires::Unattached;
    }
    match kind {
        "tracepoint" | "tp" => tracepoint(target),
        "raw_tracepoint" | "raw_tp" | "tp_btf" | "raw_tracepoint.w" | "raw_tp.w" => {
            bare_tracepoint(target)
        }
        "lsm" | "lsm.s" | "lsm_cgroup" => lsm(target.trim_start_matches("bpf_lsm_")),
        "fentry" | "fexit" | "fmod_ret" | "fentry.s" | "fexit.s" | "fmod_ret.s" | "kprobe"
        | "kretprobe" | "tracing" | "kprobe.multi" | "kretprobe.multi" => function(target),
        "ksyscall" | "kretsyscall" => syscall(target),
        "cgroup" | "cgroup_skb" | "cgroup_sock_addr" => cgroup(target),
        "sockops" | "sock_ops" => inside(|r| r.sockets.contains(&"sockops")),
        "xdp" | "xdp.frags" => packet("xdp", point),
        "tc" | "classifier" | "tcx" => packet(if kind == "tcx" { "tcx" } else { "tc" }, point),
        "socket" => packet("socket", point),
        "netfilter" => packet("netfilter", point),
        _ => Fires::Nowhere(format!(
            "a {kind} program runs outside the system calls of a benchmark (or is attached by its loader, not by its section)"
        )),
    }
}

/// `tracepoint/syscalls/x` → (`tracepoint`, `syscalls/x`); `lsm bpf_lsm_file_open` → (`lsm`,
/// `bpf_lsm_file_open`); a bare kind → (kind, "").
fn split(point: &str) -> (&str, &str) {
    let cut = point.find(['/', ' ']).unwrap_or(point.len());
    let (kind, rest) = point.split_at(cut);
    (kind, rest.get(1..).unwrap_or("").trim())
}

fn is_tracing_kind(kind: &str) -> bool {
    matches!(
        kind,
        "tracepoint"
            | "tp"
            | "raw_tracepoint"
            | "raw_tp"
            | "tp_btf"
            | "lsm"
            | "lsm.s"
            | "kprobe"
            | "kretprobe"
            | "fentry"
            | "fexit"
    )
}

/// The operations whose reach passes `test`, or nowhere.
fn inside(test: impl Fn(&super::entry::Reach) -> bool) -> Fires {
    let v: Vec<Operation> = Operation::ALL
        .into_iter()
        .filter(|o| test(o.reach()))
        .collect();
    if v.is_empty() {
        Fires::Nowhere(String::new())
    } else {
        Fires::Inside(v)
    }
}

/// `syscalls/sys_enter_X`, `raw_syscalls/sys_enter`, `sched/sched_process_fork`.
fn tracepoint(target: &str) -> Fires {
    let (category, name) = target.split_once('/').unwrap_or(("", target));
    match category {
        "syscalls" => match name
            .strip_prefix("sys_enter_")
            .or_else(|| name.strip_prefix("sys_exit_"))
        {
            Some(call) => syscall(call),
            None => Fires::Nowhere(format!("{target} is no system call's tracepoint")),
        },
        "raw_syscalls" => Fires::Every,
        _ => bare_tracepoint(name),
    }
}

/// A tracepoint by its bare name (a raw tracepoint's, or the name part of a tracepoint's).
fn bare_tracepoint(name: &str) -> Fires {
    // The kernel's link names a syscall tracepoint without its category (`sys_enter_execve`).
    let call = name
        .strip_prefix("sys_enter_")
        .or_else(|| name.strip_prefix("sys_exit_"));
    if let Some(call) = call {
        return syscall(call);
    }
    match name {
        "" => Fires::Unattached,
        "sys_enter" | "sys_exit" => Fires::Every,
        "sched_process_exec" => Fires::Nowhere(
            "sched_process_exec fires only when an exec succeeds, which would replace the bench: the exec operation fails after the LSM exec checks".into(),
        ),
        "sched_process_exit" | "sched_process_free" | "sched_process_wait" => Fires::Outside(
            format!("{name} fires in the fork operation's child or its wait, after the timed clone"),
        ),
        _ => named(
            inside(|r| r.tracepoints.contains(&name)),
            format!("no operation fires the tracepoint {name}"),
        ),
    }
}

/// A system call by name (`execve`, from `sys_enter_execve` or a `__x64_sys_execve` probe):
/// every operation that times it (both execs time `execve`).
fn syscall(call: &str) -> Fires {
    let timing: Vec<Operation> = Operation::ALL
        .into_iter()
        .filter(|o| o.reach().syscall == call)
        .collect();
    if !timing.is_empty() {
        return Fires::Inside(timing);
    }
    let outside: Vec<&str> = Operation::ALL
        .into_iter()
        .filter(|o| o.reach().outside.contains(&call))
        .map(Operation::name)
        .collect();
    if !outside.is_empty() {
        return Fires::Outside(format!(
            "{call}(2) is made outside the timed span ({} loop)",
            outside.join(", ")
        ));
    }
    Fires::Nowhere(format!("no operation times {call}(2)"))
}

/// An LSM hook by name (`file_open`).
fn lsm(hook: &str) -> Fires {
    named(
        inside(|r| r.lsm.contains(&hook)),
        format!("no operation reaches the LSM hook {hook}"),
    )
}

/// A kernel function, or a system call's entry (`__x64_sys_openat`, `__se_sys_…`, `ksys_read`).
fn function(name: &str) -> Fires {
    let name = name.split(['+', ' ']).next().unwrap_or(name);
    for prefix in [
        "__x64_sys_",
        "__ia32_sys_",
        "__arm64_sys_",
        "__riscv_sys_",
        "__s390x_sys_",
        "__se_sys_",
        "__do_sys_",
        "sys_",
    ] {
        if let Some(call) = name.strip_prefix(prefix) {
            return syscall(call);
        }
    }
    named(
        inside(|r| r.functions.contains(&name)),
        format!("no operation is known to reach the kernel function {name}"),
    )
}

/// `cgroup/connect4`, `cgroup_skb/egress`, or a link's `id N (CgroupInet4Connect)`.
fn cgroup(target: &str) -> Fires {
    let point = match target.rsplit_once('(') {
        Some((_, attach)) => link_attach_type(attach.trim_end_matches(')')),
        None if target.starts_with("egress") || target.starts_with("ingress") => "skb",
        // libbpf's older name of the sock_create attach point.
        None if target == "sock" => "sock_create",
        None => target,
    };
    named(
        inside(|r| r.sockets.contains(&point)),
        format!("no operation's timed call reaches the cgroup hook {target} (sockets are made and closed outside the span)"),
    )
}

/// A cgroup link's attach type as libbpf-rs prints it, as a section's name for it.
fn link_attach_type(attach: &str) -> &str {
    match attach {
        "CgroupInet4Connect" => "connect4",
        "CgroupUdp4Sendmsg" => "sendmsg4",
        "CgroupUdp4Recvmsg" => "recvmsg4",
        "CgroupInetEgress" | "CgroupInetIngress" => "skb",
        "CgroupSockOps" => "sockops",
        "CgroupInetSockCreate" => "sock_create",
        other => other,
    }
}

/// A packet program (`xdp`, `tc`, `tcx`, `socket`): the packet operations, which send through an
/// interface and a socket the tool attaches it to.
fn packet(kind: &str, point: &str) -> Fires {
    named(
        inside(|r| r.sockets.contains(&kind)),
        format!("no operation sends packets past {point}"),
    )
}

/// `fires`, with `why` for an empty Nowhere.
fn named(fires: Fires, why: String) -> Fires {
    match fires {
        Fires::Nowhere(w) if w.is_empty() => Fires::Nowhere(why),
        other => other,
    }
}

/// Choose the operation for `programs` (name, attach point): the one firing most of them inside
/// its span, ties to the catalogue's order; openat when none fires any.
pub fn choose(programs: &[(String, String)]) -> Chosen {
    let reach: Vec<ProgramReach> = programs
        .iter()
        .map(|(program, point)| ProgramReach {
            program: program.clone(),
            point: point.clone(),
            fires: fires(point),
        })
        .collect();
    let op = firing_op(&reach).unwrap_or(Operation::Openat);
    given(op, OpChoice::Auto, reach)
}

/// The record of `op` for `programs` whose reach is known, chosen `by`.
pub fn given(op: Operation, by: OpChoice, programs: Vec<ProgramReach>) -> Chosen {
    let fired: Vec<String> = programs
        .iter()
        .filter(|p| p.fires.inside(op))
        .map(|p| p.program.clone())
        .collect();
    let mut chosen = Chosen {
        op,
        by,
        fired,
        programs,
        why: String::new(),
    };
    chosen.why = why(&chosen);
    chosen
}

/// The sentence for a choice, with the programs attached nowhere said at its end.
fn why(c: &Chosen) -> String {
    let nowhere: Vec<&str> = c
        .programs
        .iter()
        .filter(|p| p.fires == Fires::AttachedNowhere)
        .map(|p| p.program.as_str())
        .collect();
    let mut sentence = why_attached(c);
    if !nowhere.is_empty() {
        sentence.push_str(&format!(
            "; {} loaded, attached nowhere (no operation can run {})",
            nowhere.join(", "),
            match nowhere.len() {
                1 => "it",
                _ => "them",
            }
        ));
    }
    sentence
}

/// The sentence for the programs that have an attach point.
fn why_attached(c: &Chosen) -> String {
    let attached: Vec<&ProgramReach> = c.programs.iter().filter(|p| p.fires.has_point()).collect();
    if attached.is_empty() {
        let tail_call_targets = c.programs.iter().any(|p| p.fires == Fires::Unattached);
        return match tail_call_targets {
            true => format!(
                "--op {}: no program of the object names an attach point",
                c.op
            ),
            false => format!("--op {}: no program is attached anywhere", c.op),
        };
    }
    if c.fires_nothing() {
        return match (c.by, firing_op(&c.programs)) {
            (OpChoice::Given, Some(other)) => format!(
                "--op {} fires none of {}; --op {other} does: timing {} as asked, the programs will not run inside it",
                c.op,
                described(&attached),
                c.op
            ),
            _ => no_operation(c.op, &attached, c.by),
        };
    }
    let points: Vec<String> = attached
        .iter()
        .filter(|p| c.fired.contains(&p.program))
        .map(|p| format!("{} ({})", p.program, p.point))
        .collect();
    let how = match c.by {
        OpChoice::Given => "--op",
        OpChoice::Auto | OpChoice::Default => "--op auto chose",
    };
    let mut s = format!(
        "{how} {}: {} fires {} inside each timed call",
        c.op,
        c.op.reach().syscall,
        points.join(", ")
    );
    let left: Vec<String> = attached
        .iter()
        .filter(|p| !c.fired.contains(&p.program))
        .map(|p| format!("{} ({})", p.program, p.point))
        .collect();
    if !left.is_empty() {
        s.push_str(&format!("; not {}", left.join(", ")));
    }
    s
}

/// The operation that fires most of `programs`, if any does.
fn firing_op(programs: &[ProgramReach]) -> Option<Operation> {
    let count = |op: Operation| programs.iter().filter(|p| p.fires.inside(op)).count();
    Operation::ALL
        .into_iter()
        .max_by_key(|&op| (count(op), std::cmp::Reverse(op)))
        .filter(|&op| count(op) > 0)
}

/// "prog (point), prog2 (point2)".
fn described(programs: &[&ProgramReach]) -> String {
    programs
        .iter()
        .map(|p| format!("{} ({})", p.program, p.point))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "no operation fires prog (point): …; the operations are …; a benchmark of your own works".
fn no_operation(op: Operation, attached: &[&ProgramReach], by: OpChoice) -> String {
    let programs: Vec<String> = attached
        .iter()
        .map(|p| match &p.fires {
            Fires::Nowhere(why) | Fires::Outside(why) => {
                format!("{} ({}: {why})", p.program, p.point)
            }
            _ => format!("{} ({})", p.program, p.point),
        })
        .collect();
    let names: Vec<&str> = Operation::ALL.iter().map(|o| o.name()).collect();
    let head = match by {
        OpChoice::Given => format!("--op {op} fires none of {}", programs.join(", ")),
        OpChoice::Auto | OpChoice::Default => format!(
            "no operation fires {} inside its timed span",
            programs.join(", ")
        ),
    };
    format!(
        "{head}; the operations are {}; timing {op}, the programs will not run inside it (a benchmark of your own that makes their event works: `overhead -- ./mybench`)",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attach_points_table() {
        use Operation::*;
        // (attach point, operations firing it inside the span)
        let cases: &[(&str, &[Operation])] = &[
            ("tracepoint/syscalls/sys_enter_execve", &[ExecMissing, Exec]),
            ("tp/syscalls/sys_exit_newfstatat", &[Stat]),
            (
                "tracepoint syscalls/sys_enter_sendto",
                &[Sendto, UdpVeth, TcpVeth],
            ),
            ("tracepoint sys_enter_execve", &[ExecMissing, Exec]),
            ("fentry/do_open_execat", &[ExecMissing, Exec]),
            ("tracepoint/sched/sched_process_fork", &[Fork]),
            ("raw_tp/sched_process_fork", &[Fork]),
            ("tp_btf/task_newtask", &[Fork]),
            ("lsm/bprm_check_security", &[Exec]),
            ("lsm bpf_lsm_bprm_creds_for_exec", &[Exec]),
            ("lsm/file_open", &[Openat, Exec]),
            ("lsm/file_permission", &[Read, Write]),
            ("fentry/vfs_read", &[Read]),
            ("tracing vfs_unlink", &[Unlink]),
            ("kprobe/__x64_sys_accept", &[Accept]),
            ("kprobe/tcp_v4_connect", &[Connect]),
            ("kretprobe/udp_recvmsg", &[Recvfrom, UdpVeth]),
            ("ksyscall/mmap", &[Mmap]),
            ("cgroup/connect4", &[Connect]),
            ("cgroup id 7 (CgroupUdp4Sendmsg)", &[Sendto, UdpVeth]),
            ("cgroup/recvmsg4", &[Recvfrom, UdpVeth]),
            ("sockops", &[Connect]),
        ];
        for (point, want) in cases {
            match fires(point) {
                Fires::Inside(ops) => assert_eq!(&ops[..], *want, "{point}"),
                other => panic!("{point}: {other:?}"),
            }
        }
        assert_eq!(fires("tracepoint/raw_syscalls/sys_enter"), Fires::Every);
        assert_eq!(fires("raw_tracepoint/sys_exit"), Fires::Every);
        assert_eq!(fires("tracepoint"), Fires::Unattached);
        assert_eq!(fires("lsm"), Fires::Unattached);
        for nowhere in [
            "tracepoint/syscalls/sys_enter_vhangup",
            "tracepoint/sched/sched_process_exec",
            "uprobe/libc.so.6:malloc",
            "lsm/bprm_committed_creds",
        ] {
            assert!(matches!(fires(nowhere), Fires::Nowhere(_)), "{nowhere}");
        }
        for outside in [
            "tracepoint/syscalls/sys_enter_close",
            "tp/syscalls/sys_enter_wait4",
        ] {
            assert!(matches!(fires(outside), Fires::Outside(_)), "{outside}");
        }
    }

    #[test]
    fn packet_points_are_reached_by_the_packet_operations() {
        use Operation::*;
        for point in [
            "xdp",
            "xdp.frags",
            "tc",
            "classifier",
            "tcx/ingress",
            "socket",
            "cgroup_skb/egress",
        ] {
            assert_eq!(
                fires(point),
                Fires::Inside(vec![UdpVeth, TcpVeth]),
                "{point}"
            );
        }
    }

    fn programs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, p)| (n.to_string(), p.to_string()))
            .collect()
    }

    #[test]
    fn the_operation_firing_most_programs_wins() {
        let execsnoop = programs(&[
            ("enter_execve", "tracepoint/syscalls/sys_enter_execve"),
            ("exit_execve", "tracepoint/syscalls/sys_exit_execve"),
            ("enter_openat", "tracepoint/syscalls/sys_enter_openat"),
        ]);
        let c = choose(&execsnoop);
        assert_eq!(
            c.op,
            Operation::ExecMissing,
            "the cheaper exec fires them too"
        );
        assert_eq!(c.fired, ["enter_execve", "exit_execve"]);
        assert!(
            c.why
                .starts_with("--op auto chose exec-missing: execve fires enter_execve"),
            "{}",
            c.why
        );
        assert!(c.why.contains("; not enter_openat"), "{}", c.why);
        // An exec check as well: only the full exec reaches it.
        let checked = programs(&[
            ("enter_execve", "tracepoint/syscalls/sys_enter_execve"),
            ("check", "lsm/bprm_check_security"),
        ]);
        assert_eq!(choose(&checked).op, Operation::Exec);
        // A tail-call target and an every-syscall hook change nothing; a tie goes to openat.
        let tie = programs(&[
            ("a", "tracepoint/syscalls/sys_enter_stat_never"),
            ("b", "tracepoint"),
            ("c", "raw_tp/sys_enter"),
        ]);
        let c = choose(&tie);
        assert_eq!(c.op, Operation::Openat);
        assert_eq!(c.fired, ["c"]);
    }

    #[test]
    fn a_program_no_operation_fires_is_said_in_one_sentence() {
        let c = choose(&programs(&[(
            "on_vhangup",
            "tracepoint/syscalls/sys_enter_vhangup",
        )]));
        assert_eq!(c.op, Operation::Openat);
        assert!(c.fires_nothing());
        assert!(
            c.why.starts_with("no operation fires on_vhangup (tracepoint/syscalls/sys_enter_vhangup: no operation times vhangup(2)) inside its timed span"),
            "{}",
            c.why
        );
        assert!(c.why.contains("exec, fork, stat"), "{}", c.why);
        assert!(c.why.contains("overhead -- ./mybench"), "{}", c.why);
        let given_wrong = given(
            Operation::Stat,
            OpChoice::Given,
            choose(&programs(&[("x", "tracepoint/syscalls/sys_enter_execve")])).programs,
        );
        assert!(given_wrong.fires_nothing());
        assert!(
            given_wrong.why.starts_with("--op stat fires none of x"),
            "{}",
            given_wrong.why
        );
    }

    /// The sentence of every kind of choice, word for word.
    #[test]
    fn the_wording_of_every_choice() {
        use Operation::*;
        let auto = |list: &[(&str, &str)]| choose(&programs(list)).why;
        // Auto, one program fired.
        assert_eq!(
            auto(&[("sys_enter_opena…", "tracepoint sys_enter_openat")]),
            "--op auto chose openat: openat fires sys_enter_opena… (tracepoint sys_enter_openat) inside each timed call"
        );
        // Auto, a fork tracepoint read from a perf event.
        let fork = choose(&programs(&[(
            "sched_process_f…",
            "tracepoint sched_process_fork",
        )]));
        assert_eq!(fork.op, Fork);
        assert_eq!(
            fork.why,
            "--op auto chose fork: clone fires sched_process_f… (tracepoint sched_process_fork) inside each timed call"
        );
        // Auto, with a program loaded and attached nowhere (syscount without -L).
        assert_eq!(
            auto(&[("sys_exit", "tracepoint sys_exit"), ("sys_enter", "")]),
            "--op auto chose openat: openat fires sys_exit (tracepoint sys_exit) inside each timed call; sys_enter loaded, attached nowhere (no operation can run it)"
        );
        // Auto, every program attached nowhere.
        assert_eq!(
            auto(&[("a", ""), ("b", "")]),
            "--op openat: no program is attached anywhere; a, b loaded, attached nowhere (no operation can run them)"
        );
        // Auto, only tail-call targets.
        assert_eq!(
            auto(&[("target", "tracepoint")]),
            "--op openat: no program of the object names an attach point"
        );
    }

    /// The sentence of every kind of `--op` given, word for word.
    #[test]
    fn the_wording_of_every_given_op() {
        use Operation::*;
        let auto = |list: &[(&str, &str)]| choose(&programs(list)).why;
        // Given, and it fires the program.
        let exec = given(
            Exec,
            OpChoice::Given,
            choose(&programs(&[("x", "tracepoint sys_enter_execve")])).programs,
        );
        assert_eq!(
            exec.why,
            "--op exec: execve fires x (tracepoint sys_enter_execve) inside each timed call"
        );
        // Given, fires none, another does.
        let wrong = given(
            Stat,
            OpChoice::Given,
            choose(&programs(&[("x", "tracepoint sys_enter_execve")])).programs,
        );
        assert_eq!(
            wrong.line(),
            "warning: --op stat fires none of x (tracepoint sys_enter_execve); --op exec-missing does: timing stat as asked, the programs will not run inside it"
        );
        // No operation fires it: the reason is one clause, never an empty kind.
        let vhangup = auto(&[("v", "tracepoint sys_enter_vhangup")]);
        assert!(
            vhangup.starts_with("no operation fires v (tracepoint sys_enter_vhangup: no operation times vhangup(2)) inside its timed span"),
            "{vhangup}"
        );
        for garbled in ["(: ", "a  program", "()"] {
            assert!(!vhangup.contains(garbled), "{vhangup}");
        }
    }
}

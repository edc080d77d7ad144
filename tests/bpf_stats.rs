//! The kernel's view of BPF programs against the running kernel: run statistics, the list of
//! loaded programs, the watcher for a user's loader, and map pressure on the verdict cache hook.
//!
//! These tests need root. Without it they print why and return, except under `CI=true`, where
//! not being root fails them. Tests that load programs or switch stats hold one lock. They
//! leave the machine as found: nothing attached, `kernel.bpf_stats_enabled` as it was, no pins.
//! Other processes on the machine may load programs or enable stats meanwhile: the tests
//! retry or skip the one assertion such a process would break, and say so.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ebpf_prof::bpf::{
    attach, enable_run_stats, enable_run_stats_via_sysctl, loaded_program_ids, loaded_programs,
    map_pressure, program_stats, run_stats_state, wait_for_new_programs, Attached, MapPressure,
    ObjectSource, ProgramStats, HOOK_VERDICT_CACHE, SAMPLE_HOOK, STATS_SYSCTL,
    VERDICT_CACHE_ENTRIES,
};
use ebpf_prof::error::exit_code;
use ebpf_prof::host::{sysctl, Host};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

static KERNEL: Mutex<()> = Mutex::new(());

/// `cache_stats` slot counting inserts refused with E2BIG (fixtures/hooks/verdict_cache.bpf.c).
const STAT_FULL: u32 = 4;
/// `enum verdict` VERDICT_ALLOW: what the cache holds for a path no rule matches.
const VERDICT_ALLOW: u32 = 1;

/// Takes the kernel lock if we are root; `None` (after saying why) when the test must skip.
fn kernel(test: &str) -> Option<MutexGuard<'static, ()>> {
    if !common::need_root(test) {
        return None;
    }
    Some(KERNEL.lock().unwrap_or_else(PoisonError::into_inner))
}

fn attach_bytes(name: &'static str, bytes: &'static [u8]) -> Attached {
    match attach(ObjectSource::Bytes { name, bytes }) {
        Ok(attached) => attached,
        Err(err) => panic!("attaching {name} failed: {err:#}"),
    }
}

fn open_hostname(times: usize) {
    for _ in 0..times {
        std::fs::File::open("/etc/hostname").expect("open /etc/hostname");
    }
}

fn stats_of(ids: &[u32]) -> Vec<ProgramStats> {
    program_stats(ids).unwrap_or_else(|e| panic!("program_stats({ids:?}): {e:#}"))
}

/// The sample hook's ids as [tail_call_security_check, enforce_access_policy].
fn entry_then_callee(attached: &Attached) -> Vec<u32> {
    ["tail_call_security_check", "enforce_access_policy"]
        .iter()
        .map(|name| {
            let found = attached.programs().iter().find(|p| p.name == *name);
            found.unwrap_or_else(|| panic!("no {name}")).id
        })
        .collect()
}

/// Drops `attached` and waits until the kernel has freed its programs (RCU, asynchronous).
fn detach_and_wait(attached: Attached) {
    let ids = attached.program_ids();
    drop(attached);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let loaded = loaded_program_ids().expect("list programs");
        let left: Vec<&u32> = ids.iter().filter(|id| loaded.contains(id)).collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still loaded after drop: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether anyone (another process, or the sysctl) has run stats on, so that a run counter
/// growing without our guard would not be our bug.
fn stats_held_elsewhere() -> Option<String> {
    let state = run_stats_state(&Host::live());
    state.enabled().then(|| format!("{state:?}"))
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn run_stats_count_the_sample_hook_and_stop_when_the_guard_drops() {
    let Some(_kernel) = kernel("run_stats_count_the_sample_hook") else {
        return;
    };
    let attached = attach_bytes("openat_hook", SAMPLE_HOOK);
    let ids = entry_then_callee(&attached);
    let guard = enable_run_stats().expect("enable run stats");
    assert!(
        ["BPF_ENABLE_STATS", "sysctl kernel.bpf_stats_enabled"].contains(&guard.method()),
        "{}",
        guard.method()
    );
    let state = run_stats_state(&Host::live());
    if guard.method() == "BPF_ENABLE_STATS" {
        let me = std::process::id();
        assert!(state.fd_holders.contains(&me), "{me} not in {state:?}");
    }
    let before = stats_of(&ids);
    open_hostname(500);
    let after = stats_of(&ids);
    let (entry, callee) = (&after[0], &after[1]);
    assert_eq!(
        entry.name, "tail_call_secur",
        "the kernel's name, cut to 15 bytes"
    );
    let entry_info = attached.programs().iter().find(|p| p.id == entry.id);
    assert_eq!(Some(&entry.tag), entry_info.map(|p| &p.tag));
    assert!(
        entry.run_cnt >= before[0].run_cnt + 500,
        "{before:?} -> {after:?}"
    );
    assert!(entry.run_time_ns > before[0].run_time_ns, "{after:?}");
    // A tail call is not a run: its time is inside the caller's.
    assert_eq!(callee.name, "enforce_access_");
    assert_eq!(callee.run_cnt, before[1].run_cnt, "{before:?} -> {after:?}");
    let runs = entry.run_cnt - before[0].run_cnt;
    let mean = (entry.run_time_ns - before[0].run_time_ns) as f64 / runs as f64;
    eprintln!(
        "run stats via {}: {runs} runs of tail_call_security_check, {mean:.0} ns each (the \
         tail call and enforce_access_policy included); enforce_access_policy: run_cnt {} -> {}",
        guard.method(),
        before[1].run_cnt,
        callee.run_cnt
    );

    drop(guard);
    check_stats_stopped(&ids);
    detach_and_wait(attached);
}

/// After the guard dropped, openat no longer adds to the run count (unless someone else holds
/// stats on, which is reported, not failed).
fn check_stats_stopped(ids: &[u32]) {
    if let Some(who) = stats_held_elsewhere() {
        eprintln!("not checking that stats stopped: someone else holds them on: {who}");
        return;
    }
    let before = stats_of(ids);
    open_hostname(200);
    let after = stats_of(ids);
    if let Some(who) = stats_held_elsewhere() {
        eprintln!("not checking that stats stopped: someone turned them on meanwhile: {who}");
        return;
    }
    assert_eq!(
        before[0].run_cnt, after[0].run_cnt,
        "stats still on after drop"
    );
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sysctl_fallback_counts_and_restores_the_sysctl() {
    let Some(_kernel) = kernel("sysctl_fallback_counts_and_restores_the_sysctl") else {
        return;
    };
    let host = Host::live();
    let old = sysctl::read(&host, STATS_SYSCTL).expect("read the sysctl");
    let attached = attach_bytes("openat_hook", SAMPLE_HOOK);
    let ids = entry_then_callee(&attached);
    let guard = enable_run_stats_via_sysctl(&host).expect("sysctl fallback");
    assert_eq!(guard.method(), "sysctl kernel.bpf_stats_enabled");
    assert_eq!(sysctl::read(&host, STATS_SYSCTL).expect("read"), "1");
    let before = stats_of(&ids);
    open_hostname(100);
    let after = stats_of(&ids);
    drop(guard);
    assert_eq!(sysctl::read(&host, STATS_SYSCTL).expect("read"), old);
    assert!(after[0].run_cnt >= before[0].run_cnt + 100, "{after:?}");
    check_stats_stopped(&ids);
    detach_and_wait(attached);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn loaded_programs_list_the_attached_hook_until_it_is_dropped() {
    let Some(_kernel) = kernel("loaded_programs_list_the_attached_hook") else {
        return;
    };
    let attached = attach_bytes("openat_hook", SAMPLE_HOOK);
    let ids = attached.program_ids();
    let maps: BTreeSet<u32> = attached.map_ids().into_iter().collect();
    assert_eq!(ids.len(), 2);
    // jmp_table, scratch, policy, hits.
    assert!(maps.len() >= 4, "{maps:?}");
    let loaded = loaded_programs().expect("loaded_programs");
    for (info, id) in attached.programs().iter().zip(&ids) {
        let found = loaded.iter().find(|p| p.id == *id);
        let found = found.unwrap_or_else(|| panic!("{id} not in {loaded:?}"));
        assert_eq!(found.prog_type, "tracepoint");
        assert_eq!(found.tag, info.tag);
        assert!(info.name.starts_with(&found.name), "{found:?}");
        assert!(!found.map_ids.is_empty(), "{found:?}");
        assert!(
            found.map_ids.iter().all(|m| maps.contains(m)),
            "{found:?} {maps:?}"
        );
    }
    let ids_now = loaded_program_ids().expect("ids");
    assert!(ids.iter().all(|id| ids_now.contains(id)));
    detach_and_wait(attached);
    let after = loaded_programs().expect("loaded_programs");
    assert!(after.iter().all(|p| !ids.contains(&p.id)), "{after:?}");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn watcher_returns_a_hook_attached_300_ms_later() {
    let Some(_kernel) = kernel("watcher_returns_a_hook_attached_300_ms_later") else {
        return;
    };
    let mut before = loaded_program_ids().expect("ids");
    let (ids_tx, ids_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let loader = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let attached = attach_bytes("openat_hook", SAMPLE_HOOK);
        ids_tx.send(attached.program_ids()).expect("send ids");
        let _ = done_rx.recv();
        detach_and_wait(attached);
    });
    let start = Instant::now();
    let mut found = Vec::new();
    // Another process may load programs meanwhile: those come back first; wait again.
    for _ in 0..5 {
        let new = wait_for_new_programs(&before, Duration::from_secs(10), &mut || true)
            .unwrap_or_else(|e| panic!("watcher: {e:#}"));
        found.extend(new.iter().cloned());
        before.extend(new.iter().map(|p| p.id));
        if new.iter().any(|p| p.name == "tail_call_secur") {
            break;
        }
        eprintln!("programs loaded by someone else while waiting: {new:?}");
    }
    let took = start.elapsed();
    let ours = ids_rx.recv().expect("ids from the loader thread");
    done_tx.send(()).expect("release the loader");
    loader.join().expect("loader thread");
    let seen: BTreeSet<u32> = found.iter().map(|p| p.id).collect();
    assert!(
        ours.iter().all(|id| seen.contains(id)),
        "{ours:?} not all in {found:?}"
    );
    // 300 ms before the load, 200 ms of settling after it.
    assert!(
        took >= Duration::from_millis(450),
        "returned after {took:?}"
    );
    eprintln!("watcher returned the hook's programs {took:?} after it started waiting");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn watcher_times_out_cleanly_when_nothing_loads() {
    let Some(_kernel) = kernel("watcher_times_out_cleanly_when_nothing_loads") else {
        return;
    };
    // Retried: a program loaded by another process in our window is a different answer.
    for _ in 0..5 {
        let before = loaded_program_ids().expect("ids");
        let start = Instant::now();
        let outcome = wait_for_new_programs(&before, Duration::from_millis(500), &mut || true);
        let took = start.elapsed();
        let err = match outcome {
            Ok(programs) => {
                eprintln!("someone else loaded {programs:?} meanwhile; again");
                continue;
            }
            Err(err) => err,
        };
        let text = format!("{err:#}");
        if !text.starts_with("no new BPF program appeared") {
            eprintln!("someone else loaded programs meanwhile ({text}); again");
            continue;
        }
        assert!(
            text.starts_with("no new BPF program appeared within 0.5 s after starting the command"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 1, "{text}");
        assert_eq!(exit_code(&err), 2);
        assert!(
            took >= Duration::from_millis(500) && took < Duration::from_secs(3),
            "{took:?}"
        );
        return;
    }
    panic!("other processes loaded BPF programs in each of 5 windows of 0.5 s");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn watcher_fails_at_once_when_the_command_has_exited() {
    let Some(_kernel) = kernel("watcher_fails_at_once_when_the_command_has_exited") else {
        return;
    };
    let before = loaded_program_ids().expect("ids");
    let start = Instant::now();
    let err = wait_for_new_programs(&before, Duration::from_secs(10), &mut || false)
        .expect_err("nothing was loaded");
    let text = format!("{err:#}");
    assert!(
        text.starts_with("the command exited before loading any BPF program"),
        "{text}"
    );
    assert_eq!(exit_code(&err), 3, "a program we ran failed");
    assert!(start.elapsed() < Duration::from_secs(2));
}

/// Paths `count` files in a new temp dir, created empty.
fn temp_files(count: usize) -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let paths: Vec<PathBuf> = (0..count)
        .map(|i| dir.path().join(format!("f{i:05}")))
        .collect();
    for path in &paths {
        std::fs::write(path, b"").expect("create file");
    }
    (dir, paths)
}

/// The cache key the hook computes: FNV-1a over the path's 8-byte little-endian words, the
/// NUL counted and the last word zero-padded.
fn cache_key(path: &Path) -> u64 {
    let mut bytes = path.as_os_str().as_encoded_bytes().to_vec();
    bytes.push(0);
    bytes.resize(bytes.len().next_multiple_of(8), 0);
    bytes.chunks(8).fold(0xcbf2_9ce4_8422_2325, |hash, word| {
        let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        (hash ^ word).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Every (key, value) of a map, sorted.
fn dump(map: &MapHandle) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = map
        .keys()
        .filter_map(|key| {
            let value = map.lookup(&key, MapFlags::ANY).expect("lookup")?;
            Some((key, value))
        })
        .collect();
    entries.sort();
    entries
}

fn pressure_of(id: u32) -> MapPressure {
    let mut found = map_pressure(&[id]).unwrap_or_else(|e| panic!("map_pressure: {e:#}"));
    found.pop().expect("one map")
}

/// Attaches the verdict cache hook, opens each of `paths` once, detaches (keeping the
/// cache map open), and returns the map, a handle on it and the E2BIG counter.
fn fill_verdict_cache(paths: &[PathBuf]) -> (MapPressure, MapHandle, u64, Vec<MapPressure>) {
    let attached = attach_bytes("verdict_cache", HOOK_VERDICT_CACHE);
    for path in paths {
        std::fs::File::open(path).expect("open a temp file");
    }
    let all = map_pressure(&attached.map_ids()).expect("map_pressure");
    let cache = all.iter().find(|m| m.name == "verdict_cache").cloned();
    let cache = cache.unwrap_or_else(|| panic!("no verdict_cache in {all:?}"));
    let full = attached
        .read_counter("cache_stats", STAT_FULL)
        .expect("stats");
    // Our handle keeps the map alive after the program is gone, and nothing writes to it.
    let handle = MapHandle::from_map_id(cache.id).expect("map handle");
    detach_and_wait(attached);
    (cache, handle, full, all)
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn map_pressure_counts_cached_paths_and_leaves_the_map_unchanged() {
    let Some(_kernel) = kernel("map_pressure_counts_cached_paths") else {
        return;
    };
    const FILES: usize = 300;
    let (_dir, paths) = temp_files(FILES);
    let (seen, handle, _, all) = fill_verdict_cache(&paths);
    assert_eq!(
        (seen.map_type.as_str(), seen.max_entries),
        ("hash", VERDICT_CACHE_ENTRIES)
    );
    let scratch = all.iter().find(|m| m.name == "path_buf").expect("path_buf");
    assert_eq!(
        (scratch.counted, scratch.entries),
        (false, 1),
        "{scratch:?}"
    );
    let rules = all
        .iter()
        .find(|m| m.name == "verdict_rules")
        .expect("verdict_rules");
    assert_eq!((rules.counted, rules.entries), (true, 0), "{rules:?}");

    let before = dump(&handle);
    let first = pressure_of(seen.id);
    let second = pressure_of(seen.id);
    assert_eq!(dump(&handle), before, "map_pressure changed the map");
    assert_eq!(first, second);
    assert!(first.counted);
    assert_eq!(first.entries, before.len() as u64, "{first:?}");
    // Other processes' opens are cached too: at least ours, at most the capacity.
    assert!(first.entries >= FILES as u64, "{first:?}");
    assert!(
        first.entries <= u64::from(VERDICT_CACHE_ENTRIES),
        "{first:?}"
    );
    let keys: BTreeSet<Vec<u8>> = before.iter().map(|(k, _)| k.clone()).collect();
    for path in &paths {
        let key = cache_key(path).to_ne_bytes().to_vec();
        assert!(keys.contains(&key), "{} not cached", path.display());
    }
    let allow = VERDICT_ALLOW.to_ne_bytes().to_vec();
    assert!(before.iter().all(|(_, v)| *v == allow));
    // The key walk behind LRU churn: one distinct digest per key, map untouched.
    let digests = ebpf_prof::bpf::key_digests(seen.id)
        .unwrap()
        .expect("a hash map has keys");
    assert_eq!(digests.len(), before.len());
    assert_eq!(digests.iter().collect::<BTreeSet<_>>().len(), before.len());
    assert_eq!(dump(&handle), before, "key_digests changed the map");
    eprintln!("verdict_cache after {FILES} distinct opens: {first:?}");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn verdict_cache_fills_at_capacity_and_refuses_new_paths() {
    let Some(_kernel) = kernel("verdict_cache_fills_at_capacity") else {
        return;
    };
    let files = VERDICT_CACHE_ENTRIES as usize * 3 / 2;
    let (_dir, paths) = temp_files(files);
    let (seen, handle, refused, _) = fill_verdict_cache(&paths);
    let now = pressure_of(seen.id);
    assert_eq!(now.entries, u64::from(VERDICT_CACHE_ENTRIES), "{now:?}");
    assert!(now.is_full() && seen.is_full(), "{now:?}");
    assert!(
        refused >= (files - VERDICT_CACHE_ENTRIES as usize) as u64,
        "E2BIG {refused}"
    );
    assert_eq!(dump(&handle).len(), VERDICT_CACHE_ENTRIES as usize);
    eprintln!("verdict_cache after {files} distinct opens: {now:?}; {refused} inserts refused");
}

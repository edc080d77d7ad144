//! Fault injection for the tests of "nothing left changed, whatever happens": when the
//! environment variable `EBPF_PROF_FAILPOINT` names a point the run passes, the run panics
//! there (and unwinds through every guard, as a real bug would).

/// Panic here if `EBPF_PROF_FAILPOINT` is `name`.
pub fn hit(name: &str) {
    if std::env::var("EBPF_PROF_FAILPOINT").is_ok_and(|v| v == name) {
        panic!("failpoint {name} (EBPF_PROF_FAILPOINT)");
    }
}

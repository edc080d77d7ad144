//! Threads as perf tracks them while it reads the records in time order: keyed by tid, each
//! with its latest comm (`:TID` until a COMM or FORK names it), sharing its process's address
//! space through the group leader; FORK copies the parent's comm and, for a new process, its
//! mappings. Thread 0 is `swapper`.
//!
//! Source: `tools/perf/util/machine.c: ____machine__findnew_thread()`,
//! `machine__update_thread_pid()`, `machine__process_fork_event()`,
//! `machine__process_comm_event()`, `machine__idle_thread()`; `tools/perf/util/thread.c:
//! thread__new()`, `thread__init_maps()`, `thread__fork()`, `thread__clone_maps()`.

use super::maps::{AddressSpace, UserMap};
use std::collections::HashMap;

/// Index of an interned comm string.
pub(crate) type CommId = u32;
/// Index of an address space.
pub(crate) type SpaceId = usize;

/// A thread of [`Threads`]: its index in the table, which stays valid as threads come and go
/// (a tid reused by a new thread gets a new entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ThreadId(usize);

#[derive(Debug, Clone)]
struct Thread {
    pid: i32,
    tid: i32,
    /// The pid the thread was created with (perf's `nsinfo`, which names JIT maps).
    ns_pid: i32,
    comm: CommId,
    comm_set: bool,
    space: SpaceId,
}

/// All threads, their comms and address spaces.
#[derive(Debug)]
pub(crate) struct Threads {
    by_tid: HashMap<i32, ThreadId>,
    list: Vec<Thread>,
    comms: Vec<Box<[u8]>>,
    comm_ids: HashMap<Box<[u8]>, CommId>,
    spaces: Vec<AddressSpace>,
    /// Bumped when a space changes; index = space.
    pub space_generation: Vec<u64>,
}

impl Threads {
    /// The table perf starts with: the idle thread 0/0 named `swapper`.
    pub fn new() -> Threads {
        let mut threads = Threads {
            by_tid: HashMap::new(),
            list: Vec::new(),
            comms: Vec::new(),
            comm_ids: HashMap::new(),
            spaces: Vec::new(),
            space_generation: Vec::new(),
        };
        let idle = threads.findnew(0, 0);
        threads.set_comm(idle, b"swapper");
        threads
    }

    fn thread(&self, id: ThreadId) -> &Thread {
        &self.list[id.0]
    }

    fn thread_mut(&mut self, id: ThreadId) -> &mut Thread {
        &mut self.list[id.0]
    }

    fn intern(&mut self, comm: &[u8]) -> CommId {
        if let Some(&id) = self.comm_ids.get(comm) {
            return id;
        }
        let id = self.comms.len() as CommId;
        self.comms.push(comm.into());
        self.comm_ids.insert(comm.into(), id);
        id
    }

    fn new_space(&mut self) -> SpaceId {
        self.spaces.push(AddressSpace::default());
        self.space_generation.push(0);
        self.spaces.len() - 1
    }

    /// The thread with `tid`, created when missing (`machine__findnew_thread`).
    pub fn findnew(&mut self, pid: i32, tid: i32) -> ThreadId {
        if let Some(id) = self.find(pid, tid) {
            return id;
        }
        let comm = self.intern(format!(":{tid}").as_bytes());
        let id = ThreadId(self.list.len());
        self.list.push(Thread {
            pid,
            tid,
            ns_pid: pid,
            comm,
            comm_set: false,
            space: usize::MAX,
        });
        self.by_tid.insert(tid, id);
        // thread__init_maps, after insertion: a leader's own space, or the leader's.
        let space = if pid == tid || pid == -1 {
            self.new_space()
        } else {
            let leader = self.findnew(pid, pid);
            self.thread(leader).space
        };
        self.thread_mut(id).space = space;
        id
    }

    /// The thread with `tid` if there is one, updating an unknown pid
    /// (`machine__find_thread`).
    pub fn find(&mut self, pid: i32, tid: i32) -> Option<ThreadId> {
        let id = *self.by_tid.get(&tid)?;
        self.update_pid(id, pid);
        Some(id)
    }

    /// `machine__update_thread_pid`: a thread first seen without its pid joins its leader.
    fn update_pid(&mut self, id: ThreadId, pid: i32) {
        let known = self.thread(id).pid;
        if pid == known || pid == -1 || known != -1 {
            return;
        }
        self.thread_mut(id).pid = pid;
        if pid == self.thread(id).tid {
            return;
        }
        let leader = self.findnew(pid, pid);
        self.thread_mut(id).space = self.thread(leader).space;
    }

    /// A COMM record.
    pub fn set_comm(&mut self, id: ThreadId, comm: &[u8]) {
        let comm = self.intern(comm);
        let thread = self.thread_mut(id);
        thread.comm = comm;
        thread.comm_set = true;
    }

    /// A FORK record (`machine__process_fork_event`); `exec_fork` is perf's internal
    /// `PERF_RECORD_MISC_FORK_EXEC` (synthesized: do not copy mappings).
    pub fn fork(&mut self, pid: i32, tid: i32, ppid: i32, ptid: i32, exec_fork: bool) {
        let old = self.find(pid, tid);
        let mut parent = self.findnew(ppid, ptid);
        if self.thread(parent).pid != ppid {
            self.by_tid.remove(&ptid);
            parent = self.findnew(ppid, ptid);
        }
        if old.is_some() {
            self.by_tid.remove(&tid);
        }
        let child = self.findnew(pid, tid);
        let parent = self.thread(parent).clone();
        if parent.comm_set {
            let thread = self.thread_mut(child);
            thread.comm = parent.comm;
            thread.comm_set = true;
        }
        let child = self.thread(child);
        if child.pid == parent.pid || child.space == parent.space || exec_fork {
            return;
        }
        let child_space = child.space;
        let parent_space = self.spaces[parent.space].clone();
        self.spaces[child_space].clone_from_parent(&parent_space);
        self.space_generation[child_space] += 1;
    }

    /// An EXIT record: perf 6.1 only marks the thread dead, which changes nothing here; the
    /// lookup still fills in an unknown pid.
    pub fn exit(&mut self, pid: i32, tid: i32) {
        let _ = self.find(pid, tid);
    }

    /// Add a mapping to a thread's process.
    pub fn insert_map(&mut self, id: ThreadId, map: UserMap) {
        let space = self.thread(id).space;
        self.spaces[space].insert(map);
        self.space_generation[space] += 1;
    }

    /// A thread's comm.
    pub fn comm(&self, id: ThreadId) -> CommId {
        self.thread(id).comm
    }

    /// An interned comm's bytes.
    pub fn comm_bytes(&self, id: CommId) -> &[u8] {
        self.comms.get(id as usize).map_or(&[], |comm| comm)
    }

    /// A thread's address space.
    pub fn space(&self, id: ThreadId) -> (SpaceId, &AddressSpace) {
        let space = self.thread(id).space;
        (space, &self.spaces[space])
    }

    /// The pid a thread was created with.
    pub fn ns_pid(&self, id: ThreadId) -> i32 {
        self.thread(id).ns_pid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comm(threads: &mut Threads, tid: i32) -> String {
        let thread = threads.findnew(-1, tid);
        String::from_utf8_lossy(threads.comm_bytes(threads.comm(thread))).into_owned()
    }

    #[test]
    fn unknown_threads_are_colon_tid_and_idle_is_swapper() {
        let mut t = Threads::new();
        assert_eq!(comm(&mut t, 0), "swapper");
        assert_eq!(comm(&mut t, 77), ":77");
    }

    #[test]
    fn fork_copies_comm_and_threads_share_the_leaders_space() {
        let mut t = Threads::new();
        let p = t.findnew(10, 10);
        t.set_comm(p, b"bench");
        t.fork(11, 11, 10, 10, false);
        assert_eq!(comm(&mut t, 11), "bench");
        let th = t.findnew(11, 12);
        let leader = t.findnew(11, 11);
        assert_eq!(
            t.space(th).0,
            t.space(leader).0,
            "threads share the process space"
        );
        assert_ne!(t.space(leader).0, t.space(p).0, "a new process has its own");
    }

    #[test]
    fn fork_of_a_new_process_copies_mappings_unless_synthesized() {
        let m = UserMap {
            start: 0x1000,
            end: 0x2000,
            pgoff: 0,
            dso: 0,
            identity: false,
        };
        for (exec_fork, want) in [(false, 1), (true, 0)] {
            let mut t = Threads::new();
            let p = t.findnew(10, 10);
            t.insert_map(p, m);
            t.fork(20, 20, 10, 10, exec_fork);
            let c = t.findnew(20, 20);
            assert_eq!(t.space(c).1.len(), want, "exec_fork {exec_fork}");
        }
    }

    #[test]
    fn regression_thread_seen_before_its_pid_joins_the_leader_later() {
        let mut t = Threads::new();
        let th = t.findnew(-1, 31);
        let own = t.space(th).0;
        let leader = t.findnew(30, 30);
        assert_eq!(t.find(30, 31), Some(th));
        assert_ne!(t.space(th).0, own);
        assert_eq!(t.space(th).0, t.space(leader).0);
    }
}

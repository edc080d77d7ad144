//! Processes as /proc shows them: a process and its descendants, and the CPU time they have
//! used. `overhead --attach-cmd` watches a loader this way to tell that it has gone idle without
//! loading anything, and a loader's process group, which it ends when it stops the loader.

use super::Host;

/// `pid` and every descendant (through `/proc/PID/task/TID/children`, Linux 3.5+), parents
/// first; only those still there.
pub fn tree(host: &Host, pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut next = 0;
    while next < out.len() {
        let p = out[next];
        next += 1;
        let Ok(tasks) = std::fs::read_dir(host.path(&format!("proc/{p}/task"))) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            out.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// User plus system CPU time of `pid` so far, in clock ticks, from `/proc/PID/stat`.
pub fn cpu_ticks(host: &Host, pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(host.path(&format!("proc/{pid}/stat"))).ok()?;
    parse_cpu_ticks(&stat)
}

/// utime + stime of a `/proc/PID/stat` line: fields 14 and 15, counted after the command name,
/// which is in parentheses and may itself hold spaces and parentheses.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12 here.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The processes of `host` in process group `pgid`, from each /proc/PID/stat.
pub fn group_members(host: &Host, pgid: u32) -> Vec<u32> {
    let Ok(list) = std::fs::read_dir(host.path("proc")) else {
        return Vec::new();
    };
    list.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| process_group(host, *pid) == Some(pgid))
        .collect()
}

/// Field 5 of /proc/PID/stat, counted after the parenthesised command name.
fn process_group(host: &Host, pid: u32) -> Option<u32> {
    let stat = host.read(&format!("proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// The CPU time of `pid` and its descendants together, in clock ticks.
pub fn tree_cpu_ticks(host: &Host, pid: u32) -> u64 {
    tree(host, pid)
        .into_iter()
        .filter_map(|p| cpu_ticks(host, p))
        .sum()
}

/// The CPU time of every process of group `pgid` together, in clock ticks: a loader a shell
/// put in the background is no descendant of ours any more, but still in the group.
pub fn group_cpu_ticks(host: &Host, pgid: u32) -> u64 {
    group_members(host, pgid)
        .into_iter()
        .filter_map(|p| cpu_ticks(host, p))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_count_after_a_name_with_spaces_and_parentheses() {
        let line =
            "4242 (we ird) (x)) S 1 4242 4242 0 -1 4194560 120 0 0 0 17 5 0 0 20 0 1 0 99 1000 10";
        assert_eq!(parse_cpu_ticks(line), Some(22));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn a_fixture_tree_of_processes() {
        let d = tempfile::tempdir().unwrap();
        let host = Host::at(d.path());
        for (pid, children, ticks) in [(10, "11 12", 1), (11, "13", 2), (12, "", 3), (13, "", 4)] {
            let task = d.path().join(format!("proc/{pid}/task/{pid}"));
            std::fs::create_dir_all(&task).unwrap();
            std::fs::write(task.join("children"), children).unwrap();
            let stat = format!("{pid} (p) S 1 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 1 1 1");
            std::fs::write(d.path().join(format!("proc/{pid}/stat")), stat).unwrap();
        }
        assert_eq!(tree(&host, 10), [10, 11, 12, 13]);
        assert_eq!(tree_cpu_ticks(&host, 10), 10);
        assert_eq!(
            tree(&host, 99),
            [99],
            "a process that is gone is itself only"
        );
    }
}

//! Which line info entries belong to which JIT-ed function.
//!
//! The split follows libbpf's `dissect_jited_func()` in `tools/lib/bpf/bpf_prog_linfo.c`, which
//! bpftool and perf use. `jited_line_info[0]` must be the first function's address, a new
//! function starts at the entry whose JIT address equals that function's `jited_ksyms[f]`, and
//! addresses must increase within a function. libbpf skips these checks for the last function;
//! we make them there too, so that lookups can binary-search every function.
//!
//! The other split is by `func_info[f].insn_off`, the verifier's sub-program boundaries in
//! xlated instruction offsets. It serves as a cross-check, and as the fallback when the JIT
//! addresses break libbpf's rules.

use std::ops::Range;

use super::model::{RawFuncInfo, RawLineInfo};

/// libbpf's `dissect_jited_func`: the range of `jited` (one per line info entry) owned by
/// each function, or why it cannot be split.
pub(crate) fn dissect_jited(
    ksyms: &[u64],
    lens: &[u32],
    jited: &[u64],
) -> Result<Vec<Range<usize>>, String> {
    if ksyms.is_empty() || ksyms.len() != lens.len() {
        return Err(format!(
            "{} jited_ksyms for {} jited_func_lens",
            ksyms.len(),
            lens.len()
        ));
    }
    if jited.first() != ksyms.first() {
        return Err("the first jited_line_info is not the first function's address".into());
    }
    let mut starts = vec![0];
    for entry in 1..jited.len() {
        let func = starts.len();
        if func == ksyms.len() {
            break;
        }
        let last = jited[entry - 1];
        if jited[entry] == ksyms[func] {
            if last < ksyms[func - 1] || last - ksyms[func - 1] >= u64::from(lens[func - 1]) {
                return Err(format!(
                    "line address {last:#x} is past the end of function {}",
                    func - 1
                ));
            }
            starts.push(entry);
        } else if jited[entry] <= last {
            return Err(format!(
                "line addresses go back at entry {entry} ({:#x})",
                jited[entry]
            ));
        }
    }
    if starts.len() != ksyms.len() {
        return Err(format!(
            "{} of {} functions start at a line address",
            starts.len(),
            ksyms.len()
        ));
    }
    let ranges = to_ranges(&starts, jited.len());
    check_last(
        ksyms,
        lens,
        jited,
        ranges.last().cloned().unwrap_or_default(),
    )?;
    Ok(ranges)
}

/// `starts[f]..starts[f+1]`, the last one running to `n`.
fn to_ranges(starts: &[usize], count: usize) -> Vec<Range<usize>> {
    let ends = starts.iter().skip(1).copied().chain(std::iter::once(count));
    starts.iter().zip(ends).map(|(&s, e)| s..e).collect()
}

/// What libbpf does not check for the last function: increasing addresses inside it.
fn check_last(
    ksyms: &[u64],
    lens: &[u32],
    jited: &[u64],
    range: Range<usize>,
) -> Result<(), String> {
    let last = ksyms.len() - 1;
    let func = ksyms[last]..ksyms[last].saturating_add(lens[last].into());
    let slice = &jited[range];
    if slice.windows(2).any(|w| w[1] <= w[0]) {
        return Err(format!("line addresses go back in function {last}"));
    }
    if slice.iter().any(|a| !func.contains(a)) {
        return Err(format!("a line address is outside function {last}"));
    }
    Ok(())
}

/// The split by `func_info[f].insn_off`: function f owns the entries with
/// `func_info[f].insn_off <= insn_off < func_info[f+1].insn_off`.
pub(crate) fn split_by_insn_off(
    funcs: &[RawFuncInfo],
    lines: &[RawLineInfo],
) -> Result<Vec<Range<usize>>, String> {
    if funcs.is_empty() {
        return Err("no func_info to split by".into());
    }
    if funcs.windows(2).any(|w| w[1].insn_off <= w[0].insn_off) {
        return Err("func_info insn_off not increasing".into());
    }
    if lines.windows(2).any(|w| w[1].insn_off <= w[0].insn_off) {
        return Err("line_info insn_off not increasing".into());
    }
    if lines
        .first()
        .is_some_and(|l| l.insn_off < funcs[0].insn_off)
    {
        return Err("line info before the first function".into());
    }
    let starts: Vec<usize> = funcs
        .iter()
        .map(|f| lines.partition_point(|l| l.insn_off < f.insn_off))
        .collect();
    Ok(to_ranges(&starts, lines.len()))
}

/// Whether the addresses of each function's entries are inside it and increasing, so that
/// they can be used with the insn_off split.
pub(crate) fn addresses_fit(
    ksyms: &[u64],
    lens: &[u32],
    jited: &[u64],
    ranges: &[Range<usize>],
) -> bool {
    ranges.iter().enumerate().all(|(func, range)| {
        let start = ksyms[func];
        let end = start.saturating_add(lens[func].into());
        let Some(slice) = jited.get(range.clone()) else {
            return false;
        };
        slice.windows(2).all(|w| w[0] < w[1]) && slice.iter().all(|a| (start..end).contains(a))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn li(insn_off: u32) -> RawLineInfo {
        RawLineInfo {
            insn_off,
            file_name_off: 0,
            line_off: 0,
            line_col: 0,
        }
    }

    fn fi(insn_off: u32) -> RawFuncInfo {
        RawFuncInfo {
            insn_off,
            type_id: 1,
        }
    }

    #[test]
    fn dissect_cases() {
        let ksyms = [0x1000, 0x2000];
        let lens = [0x40, 0x80];
        type Case = (&'static str, Vec<u64>, Result<Vec<Range<usize>>, ()>);
        let cases: Vec<Case> = vec![
            (
                "two funcs",
                vec![0x1000, 0x1010, 0x2000, 0x2008],
                Ok(vec![0..2, 2..4]),
            ),
            ("one line each", vec![0x1000, 0x2000], Ok(vec![0..1, 1..2])),
            ("first not at func", vec![0x1004, 0x2000], Err(())),
            ("second func missing", vec![0x1000, 0x1010], Err(())),
            (
                "back inside func 0",
                vec![0x1000, 0x1010, 0x1008, 0x2000],
                Err(()),
            ),
            (
                "equal inside func 0",
                vec![0x1000, 0x1010, 0x1010, 0x2000],
                Err(()),
            ),
            ("past end of func 0", vec![0x1000, 0x1040, 0x2000], Err(())),
            (
                "back in last func",
                vec![0x1000, 0x2000, 0x2010, 0x2008],
                Err(()),
            ),
            ("outside last func", vec![0x1000, 0x2000, 0x2080], Err(())),
            ("empty", vec![], Err(())),
        ];
        for (name, jited, want) in cases {
            let got = dissect_jited(&ksyms, &lens, &jited).map_err(|_| ());
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn insn_off_split_cases() {
        let funcs = [fi(0), fi(10)];
        let lines = [li(0), li(3), li(10), li(12)];
        assert_eq!(split_by_insn_off(&funcs, &lines), Ok(vec![0..2, 2..4]));
        assert!(split_by_insn_off(&[], &lines).is_err());
        assert!(split_by_insn_off(&[fi(10), fi(0)], &lines).is_err());
        assert!(split_by_insn_off(&funcs, &[li(3), li(3)]).is_err());
        assert!(split_by_insn_off(&[fi(2)], &[li(0)]).is_err());
    }

    #[test]
    fn addresses_fit_checks_bounds_and_order() {
        let k = [0x1000u64, 0x2000];
        let l = [0x40u32, 0x80];
        let r = [0..2, 2..3];
        assert!(addresses_fit(&k, &l, &[0x1000, 0x1010, 0x2000], &r));
        assert!(!addresses_fit(&k, &l, &[0x1000, 0x1040, 0x2000], &r));
        assert!(!addresses_fit(&k, &l, &[0x1010, 0x1000, 0x2000], &r));
        assert!(!addresses_fit(&k, &l, &[0x1000], &r));
    }
}

//! `diff --text`: each function's share of its profile in a base and a hooked profile, and how
//! it moved. Shares are of each profile's own total, so profiles of different lengths compare
//! (the same normalisation the differential flame graph uses). Sorted by the move in self share,
//! as `perf diff` does: that is where the extra time goes; inclusive moves are shown beside.

use crate::profile::frames::{display, Kind};
use crate::profile::stacks::Stacks;
use crate::stats::pct;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// One function's shares (% of its profile) in both profiles.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delta {
    /// The function (BPF programs without their tag).
    pub name: String,
    /// Whether it is BPF code.
    pub bpf: bool,
    pub base_self: f64,
    pub hooked_self: f64,
    pub delta_self: f64,
    pub base_incl: f64,
    pub hooked_incl: f64,
    pub delta_incl: f64,
}

#[derive(Default)]
struct Shares {
    own: BTreeMap<String, u64>,
    incl: BTreeMap<String, u64>,
    total: u64,
}

fn shares(stacks: &Stacks) -> Shares {
    let mut tally = Shares::default();
    for st in &stacks.stacks {
        crate::report::add(&mut tally.total, st.count);
        let frames = stacks.frames_of(st);
        let names: BTreeSet<String> = frames.iter().map(|frame| frame.display()).collect();
        for name in names {
            crate::report::add(tally.incl.entry(name).or_default(), st.count);
        }
        if let Some(leaf) = frames.last() {
            crate::report::add(tally.own.entry(leaf.display()).or_default(), st.count);
        }
    }
    tally
}

/// The names of the BPF code frames of a profile, as a person reads them.
fn bpf_names(stacks: &Stacks, into: &mut BTreeSet<String>) {
    for stack in &stacks.stacks {
        for frame in stacks.frames_of(stack) {
            if matches!(frame.kind, Kind::Program | Kind::Glue) {
                into.insert(display(frame.bare()));
            }
        }
    }
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// Every function of either profile, biggest move in self share first.
pub fn deltas(base: &Stacks, hooked: &Stacks) -> Vec<Delta> {
    let right = shares(base);
    let hooked_shares = shares(hooked);
    let mut bpf = BTreeSet::new();
    bpf_names(hooked, &mut bpf);
    bpf_names(base, &mut bpf);
    let names: BTreeSet<&String> = right.incl.keys().chain(hooked_shares.incl.keys()).collect();
    let mut out: Vec<Delta> = names
        .into_iter()
        .map(|frame| {
            let get = |m: &BTreeMap<String, u64>, t| pct(m.get(frame).copied().unwrap_or(0), t);
            let bs = get(&right.own, right.total);
            let hs = get(&hooked_shares.own, hooked_shares.total);
            let bi = get(&right.incl, right.total);
            let hi = get(&hooked_shares.incl, hooked_shares.total);
            Delta {
                name: frame.clone(),
                bpf: bpf.contains(frame),
                base_self: bs,
                hooked_self: hs,
                delta_self: round2(hs - bs),
                base_incl: bi,
                hooked_incl: hi,
                delta_incl: round2(hi - bi),
            }
        })
        .collect();
    out.sort_by(|left, right| {
        right
            .delta_self
            .abs()
            .total_cmp(&left.delta_self.abs())
            .then(right.delta_incl.abs().total_cmp(&left.delta_incl.abs()))
            .then(left.name.cmp(&right.name))
    });
    out
}

/// The `top` biggest moves as a table.
pub fn table(deltas: &[Delta], top: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>8} {:>8} {:>8}   {:>8} {:>8} {:>8}   function",
        "self", "self", "Δ self", "incl", "incl", "Δ incl"
    );
    let _ = writeln!(
        out,
        "{:>8} {:>8} {:>8}   {:>8} {:>8}",
        "base", "hooked", "", "base", "hooked"
    );
    for delta in deltas.iter().take(top) {
        let tag = if delta.bpf { " [bpf]" } else { "" };
        let _ = writeln!(
            out,
            "{:>7.2}% {:>7.2}% {:>+7.2}%   {:>7.2}% {:>7.2}% {:>+7.2}%   {}{tag}",
            delta.base_self,
            delta.hooked_self,
            delta.delta_self,
            delta.base_incl,
            delta.hooked_incl,
            delta.delta_incl,
            delta.name
        );
    }
    out
}

/// The biggest `top` moves as JSON: `{"schema": 1, "functions": [...]}`.
pub fn json(deltas: &[Delta], top: usize) -> anyhow::Result<String> {
    #[derive(Serialize)]
    struct Doc<'a> {
        schema: u32,
        functions: &'a [Delta],
    }
    let doc = Doc {
        schema: crate::out::JSON_SCHEMA,
        functions: &deltas[..top.min(deltas.len())],
    };
    Ok(serde_json::to_string_pretty(&doc)? + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_are_of_each_profiles_own_total() {
        let base = Stacks::parse("b;sys_[k];open_[k] 60\nb;sys_[k];close_[k] 40\n").unwrap();
        let hooked = Stacks::parse(
            "b;sys_[k];open_[k] 120\nb;sys_[k];close_[k] 80\nb;sys_[k];trace_call_bpf_[k];bpf_prog_0123456789abcdef_hook 200\n",
        )
        .unwrap();
        let d = deltas(&base, &hooked);
        assert_eq!(d[0].name, "hook");
        assert!(d[0].bpf);
        assert_eq!(
            (d[0].base_self, d[0].hooked_self, d[0].delta_self),
            (0.0, 50.0, 50.0)
        );
        let open = d.iter().find(|x| x.name == "open").unwrap();
        assert_eq!(
            (open.base_self, open.hooked_self, open.delta_self),
            (60.0, 30.0, -30.0)
        );
        let sys = d.iter().find(|x| x.name == "sys").unwrap();
        assert_eq!(sys.delta_incl, 0.0);
        let t = table(&d, 2);
        assert!(t.contains("+50.00%") && t.contains("hook [bpf]"), "{t}");
        assert_eq!(t.lines().count(), 4);
        let j: serde_json::Value = serde_json::from_str(&json(&d, 1).unwrap()).unwrap();
        assert_eq!(j["schema"], 1);
        assert_eq!(j["functions"][0]["name"], "hook");
        assert_eq!(j["functions"].as_array().unwrap().len(), 1);
    }
}

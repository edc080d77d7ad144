//! Map pressure: the maps of the programs under test read (never written) after each attached
//! round, and what that means — a full hash map refuses new keys (E2BIG), a full LRU map evicts
//! silently, and either moves the latency of every operation on the box.

use crate::bpf::{self, MapPressure};
use anyhow::Result;
use serde::Serialize;
use std::collections::HashSet;

/// The maps of one round, read after the benchmark and before detaching.
#[derive(Debug, Clone, Serialize)]
pub struct RoundMaps {
    pub arm: String,
    pub round: usize,
    pub maps: Vec<MapPressure>,
    /// Key digests of the LRU maps, by map id, to measure churn between rounds.
    #[serde(skip)]
    pub lru_keys: Vec<(u32, Vec<u64>)>,
}

/// Read the maps `ids` (skipping the ones that vanished), and the keys of LRU maps.
pub fn read(arm: &str, round: usize, ids: &[u32]) -> Result<RoundMaps> {
    let mut maps = Vec::new();
    let mut lru_keys = Vec::new();
    for id in ids {
        if let Ok(mut m) = bpf::map_pressure(&[*id]) {
            if m.iter().any(|m| m.map_type.starts_with("lru")) {
                if let Ok(Some(k)) = bpf::key_digests(*id) {
                    lru_keys.push((*id, k));
                }
            }
            maps.append(&mut m);
        }
    }
    Ok(RoundMaps {
        arm: arm.into(),
        round,
        maps,
        lru_keys,
    })
}

/// One map over all rounds.
#[derive(Debug, Clone, Serialize)]
pub struct MapSummary {
    pub name: String,
    pub map_type: String,
    pub max_entries: u32,
    /// The most elements seen after any round.
    pub peak: u64,
    /// The first round (1-based) after which it was full.
    pub full_after_round: Option<usize>,
    /// Elements after each round, in order.
    pub per_round: Vec<u64>,
    /// For an LRU map that lives across rounds (someone else's, watched with --prog-id): keys
    /// present after a round that were not there after the one before.
    pub churn: Vec<u64>,
    /// What it means, in words, when full or close to it (≥ 90%).
    pub message: Option<String>,
}

impl MapSummary {
    fn new(m: &MapPressure) -> MapSummary {
        MapSummary {
            name: m.name.clone(),
            map_type: m.map_type.clone(),
            max_entries: m.max_entries,
            peak: 0,
            full_after_round: None,
            per_round: Vec::new(),
            churn: Vec::new(),
            message: None,
        }
    }
}

/// Summarise the counted, non-array maps of the rounds, by map name.
pub fn summarise(rounds: &[RoundMaps]) -> Vec<MapSummary> {
    let mut out: Vec<MapSummary> = Vec::new();
    for r in rounds {
        for m in r.maps.iter().filter(|m| m.counted) {
            let i = out
                .iter()
                .position(|s| s.name == m.name)
                .unwrap_or_else(|| {
                    out.push(MapSummary::new(m));
                    out.len() - 1
                });
            let s = &mut out[i];
            s.peak = s.peak.max(m.entries);
            s.per_round.push(m.entries);
            if s.full_after_round.is_none() && m.entries >= u64::from(m.max_entries) {
                s.full_after_round = Some(r.round);
            }
        }
    }
    churn(rounds, &mut out);
    for s in &mut out {
        s.message = message(s);
    }
    out
}

/// Keys new since the previous read of the same map (same id: a map that outlives rounds).
fn churn(rounds: &[RoundMaps], out: &mut [MapSummary]) {
    let mut last: Vec<(u32, &Vec<u64>)> = Vec::new();
    for r in rounds {
        for (id, keys) in &r.lru_keys {
            if let Some((_, prev)) = last.iter().find(|(i, _)| i == id) {
                let prev: HashSet<&u64> = prev.iter().collect();
                let new = keys.iter().filter(|k| !prev.contains(k)).count() as u64;
                let name = r.maps.iter().find(|m| m.id == *id).map(|m| &m.name);
                if let Some(s) = out.iter_mut().find(|s| Some(&s.name) == name) {
                    s.churn.push(new);
                }
            }
            last.retain(|(i, _)| i != id);
            last.push((*id, keys));
        }
    }
}

fn message(s: &MapSummary) -> Option<String> {
    let head = format!(
        "map {} ({}, max_entries {})",
        s.name, s.map_type, s.max_entries
    );
    let churned = s.churn.iter().copied().max().unwrap_or(0);
    if churned > 0 && s.full_after_round.is_some() {
        return Some(format!("{head}: full, and up to {churned} of its keys were replaced between rounds: the LRU map is evicting silently"));
    }
    if let Some(r) = s.full_after_round {
        let what = if s.map_type.starts_with("lru") {
            "an LRU map evicts silently: entries are lost and recomputed on every miss"
        } else {
            "new keys fail with E2BIG: every miss past this point stays a miss"
        };
        return Some(format!(
            "{head}: {}/{} after round {r}: {what}",
            s.peak, s.max_entries
        ));
    }
    (s.peak * 10 >= u64::from(s.max_entries) * 9).then(|| {
        format!(
            "{head}: {}/{} at its peak: close to full",
            s.peak, s.max_entries
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, kind: &str, max: u32, n: u64) -> MapPressure {
        MapPressure {
            id: 1,
            name: name.into(),
            map_type: kind.into(),
            max_entries: max,
            entries: n,
            counted: true,
        }
    }

    fn round(round: usize, maps: Vec<MapPressure>) -> RoundMaps {
        RoundMaps {
            arm: "treat".into(),
            round,
            maps,
            lru_keys: vec![],
        }
    }

    #[test]
    fn full_hash_and_lru_and_near_full() {
        let rounds = vec![
            round(
                1,
                vec![
                    m("verdict_cache", "hash", 1024, 700),
                    m("lru", "lru_hash", 10, 10),
                    m("near", "hash", 100, 95),
                ],
            ),
            round(
                2,
                vec![
                    m("verdict_cache", "hash", 1024, 1024),
                    m("lru", "lru_hash", 10, 10),
                    m("near", "hash", 100, 91),
                ],
            ),
        ];
        let s = summarise(&rounds);
        let v = s.iter().find(|s| s.name == "verdict_cache").unwrap();
        assert_eq!(v.full_after_round, Some(2));
        assert_eq!(v.message.as_deref(), Some("map verdict_cache (hash, max_entries 1024): 1024/1024 after round 2: new keys fail with E2BIG: every miss past this point stays a miss"));
        assert!(s
            .iter()
            .find(|s| s.name == "lru")
            .unwrap()
            .message
            .as_ref()
            .unwrap()
            .contains("evicts silently"));
        assert!(s
            .iter()
            .find(|s| s.name == "near")
            .unwrap()
            .message
            .as_ref()
            .unwrap()
            .contains("close to full"));
        let quiet = summarise(&[round(1, vec![m("x", "hash", 100, 3)])]);
        assert_eq!(quiet[0].message, None);
    }

    #[test]
    fn lru_churn_between_rounds_of_a_lasting_map() {
        let r = |n, keys: Vec<u64>| RoundMaps {
            lru_keys: vec![(1, keys)],
            ..round(n, vec![m("flows", "lru_hash", 4, 4)])
        };
        let s = summarise(&[
            r(1, vec![1, 2, 3, 4]),
            r(2, vec![1, 2, 5, 6]),
            r(3, vec![1, 2, 5, 6]),
        ]);
        assert_eq!(s[0].churn, vec![2, 0]);
        assert!(
            s[0].message
                .as_ref()
                .unwrap()
                .contains("up to 2 of its keys were replaced"),
            "{:?}",
            s[0].message
        );
    }
}

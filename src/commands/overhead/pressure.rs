//! Map pressure: the maps of the programs under test read (never written) after each attached
//! round, and what that means — a full hash map refuses new keys (E2BIG), a full LRU map evicts
//! silently, and either moves the latency of every operation on the box.

use crate::bpf::{self, MapPressure};
use anyhow::Result;
use serde::Serialize;

/// The maps of one round, read after the benchmark and before detaching.
#[derive(Debug, Clone, Serialize)]
pub struct RoundMaps {
    pub arm: String,
    pub round: usize,
    pub maps: Vec<MapPressure>,
}

/// Read the maps `ids` (skipping the ones that vanished).
pub fn read(arm: &str, round: usize, ids: &[u32]) -> Result<RoundMaps> {
    let mut maps = Vec::new();
    for id in ids {
        if let Ok(mut m) = bpf::map_pressure(&[*id]) {
            maps.append(&mut m);
        }
    }
    Ok(RoundMaps {
        arm: arm.into(),
        round,
        maps,
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
    /// The first round (1-based, attached arm) after which it was full.
    pub full_after_round: Option<usize>,
    /// Elements after each round, in order.
    pub per_round: Vec<u64>,
    /// What it means, in words, when full or close to it (≥ 90%).
    pub message: Option<String>,
}

/// Summarise the counted, non-array maps of the rounds, by map name.
pub fn summarise(rounds: &[RoundMaps]) -> Vec<MapSummary> {
    let mut out: Vec<MapSummary> = Vec::new();
    for r in rounds {
        for m in r.maps.iter().filter(|m| m.counted) {
            let s = match out.iter_mut().position(|s| s.name == m.name) {
                Some(i) => &mut out[i],
                None => {
                    out.push(MapSummary {
                        name: m.name.clone(),
                        map_type: m.map_type.clone(),
                        max_entries: m.max_entries,
                        peak: 0,
                        full_after_round: None,
                        per_round: Vec::new(),
                        message: None,
                    });
                    out.last_mut().expect("just pushed")
                }
            };
            s.peak = s.peak.max(m.entries);
            s.per_round.push(m.entries);
            if s.full_after_round.is_none() && m.entries >= u64::from(m.max_entries) {
                s.full_after_round = Some(r.round);
            }
        }
    }
    for s in &mut out {
        s.message = message(s);
    }
    out
}

fn message(s: &MapSummary) -> Option<String> {
    let head = format!(
        "map {} ({}, max_entries {})",
        s.name, s.map_type, s.max_entries
    );
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

    #[test]
    fn full_hash_and_lru_and_near_full() {
        let rounds = vec![
            RoundMaps {
                arm: "treat".into(),
                round: 1,
                maps: vec![
                    m("verdict_cache", "hash", 1024, 700),
                    m("lru", "lru_hash", 10, 10),
                    m("near", "hash", 100, 95),
                ],
            },
            RoundMaps {
                arm: "treat".into(),
                round: 2,
                maps: vec![
                    m("verdict_cache", "hash", 1024, 1024),
                    m("lru", "lru_hash", 10, 10),
                    m("near", "hash", 100, 91),
                ],
            },
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
        let quiet = summarise(&[RoundMaps {
            arm: "t".into(),
            round: 1,
            maps: vec![m("x", "hash", 100, 3)],
        }]);
        assert_eq!(quiet[0].message, None);
    }
}

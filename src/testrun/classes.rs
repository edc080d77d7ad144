//! The classes of a test run: packets grouped by the program's verdict, their IP version,
//! protocol and destination port. Each class keeps its packets (indices into the run's list),
//! an example line, and whether the program rewrote any of them.

use crate::packets::{summarise, Packet, Protocol};
use std::collections::BTreeMap;

/// What a class is: the verdict and where the packets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClassKey {
    pub retval: u32,
    pub family: Family,
    pub protocol: Protocol,
    pub destination_port: Option<u16>,
}

/// The IP version of a packet, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Ipv4,
    Ipv6,
    NotIp,
}

/// Whether the program left a class's packets as they came.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rewrite {
    Untouched,
    /// The output of one run differed from its input for at least one packet of the class.
    Rewrites,
}

/// One class and its packets.
#[derive(Debug, Clone)]
pub struct Class {
    pub key: ClassKey,
    /// Indices into the run's packets, in their order.
    pub packets: Vec<usize>,
    /// The first packet in one line (`UDP 10.0.0.1:40000 > 10.0.0.2:53`).
    pub example: String,
    pub rewrite: Rewrite,
}

/// The verdict and output of one run of each packet, `None` for a packet the kernel refused.
pub type Outcomes = [Option<crate::testrun::kernel::Outcome>];

/// Group `packets` by their outcomes; packets the kernel refused are left out.
pub fn group(packets: &[Packet], outcomes: &Outcomes) -> Vec<Class> {
    let mut classes: BTreeMap<ClassKey, Class> = BTreeMap::new();
    for (index, (packet, outcome)) in packets.iter().zip(outcomes).enumerate() {
        let Some(outcome) = outcome else { continue };
        let summary = summarise(&packet.bytes);
        let family = match summary.addresses {
            None => Family::NotIp,
            Some(_) if summary.is_ipv6() => Family::Ipv6,
            Some(_) => Family::Ipv4,
        };
        let key = ClassKey {
            retval: outcome.retval,
            family,
            protocol: summary.protocol,
            destination_port: summary.destination_port(),
        };
        let class = classes.entry(key).or_insert_with(|| Class {
            key,
            packets: Vec::new(),
            example: summary.to_string(),
            rewrite: Rewrite::Untouched,
        });
        class.packets.push(index);
        if outcome.output != packet.bytes {
            class.rewrite = Rewrite::Rewrites;
        }
    }
    classes.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packets::builtin;
    use crate::testrun::kernel::Outcome;

    #[test]
    fn packets_group_by_verdict_family_protocol_and_port() {
        let packets = builtin::packets();
        // A fake program: drop UDP to 53, pass the rest, rewrite nothing.
        let outcomes: Vec<Option<Outcome>> = packets
            .iter()
            .map(|p| {
                let dns = summarise(&p.bytes).destination_port() == Some(53);
                Some(Outcome {
                    retval: if dns { 1 } else { 2 },
                    output: p.bytes.clone(),
                })
            })
            .collect();
        let classes = group(&packets, &outcomes);
        assert_eq!(classes.len(), 6, "{classes:#?}");
        for class in &classes {
            assert_eq!(class.packets.len(), usize::from(builtin::PER_KIND));
            assert_eq!(class.rewrite, Rewrite::Untouched);
            assert_eq!(
                class.key.retval == 1,
                class.key.destination_port == Some(53)
            );
        }
        let ipv6 = classes
            .iter()
            .filter(|c| c.key.family == Family::Ipv6)
            .count();
        assert_eq!(ipv6, 2);
    }

    #[test]
    fn a_changed_output_marks_the_class_and_refused_packets_are_left_out() {
        let packets = builtin::packets();
        let mut outcomes: Vec<Option<Outcome>> = packets
            .iter()
            .map(|p| {
                Some(Outcome {
                    retval: 2,
                    output: p.bytes.clone(),
                })
            })
            .collect();
        if let Some(outcome) = outcomes[0].as_mut() {
            outcome.output[0] ^= 1;
        }
        outcomes[1] = None;
        let classes = group(&packets, &outcomes);
        let first = classes
            .iter()
            .find(|c| c.packets.contains(&0))
            .expect("class of 0");
        assert_eq!(first.rewrite, Rewrite::Rewrites);
        assert!(classes.iter().all(|c| !c.packets.contains(&1)));
        let untouched = classes.iter().filter(|c| c.rewrite == Rewrite::Untouched);
        assert_eq!(untouched.count(), classes.len() - 1);
    }
}

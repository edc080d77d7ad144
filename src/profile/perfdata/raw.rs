//! Samples as the file holds them, for readers that do their own symbolisation (`annotate`
//! maps BPF instruction addresses to source lines): each sample's call chain addresses
//! (leaf first, context markers removed), its weight (the period, else 1), pid and tid.
//! No thread, map or symbol state is built, so this is one cheap pass in file order.

use super::attr::sample;
use super::error::PerfDataError;
use super::file::PerfData;
use super::record::{self, callchain_entries};
use std::path::Path;

/// Callchain entries at or above this are context markers (`PERF_CONTEXT_MAX`).
const CONTEXT_MAX: u64 = -4095i64 as u64;

/// One sample, borrowed for the duration of the callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawSample<'a> {
    /// Call chain addresses, leaf first, without `PERF_CONTEXT_*` markers; the sample's IP
    /// alone when it has no call chain.
    pub ips: &'a [u64],
    /// The sample's period (ns for cpu-clock, cycles for cycles), 1 when not recorded.
    pub weight: u64,
    pub pid: u32,
    pub tid: u32,
    /// Index of the sample's event in [`PerfData::attrs`].
    pub attr: usize,
}

/// Call `f` for every sample of the file at `path` (every event, file order).
pub fn for_each_sample(
    path: &Path,
    visit: impl FnMut(&RawSample<'_>),
) -> Result<PerfData, PerfDataError> {
    let data = PerfData::open(path)?;
    data.for_each_sample(visit)?;
    Ok(data)
}

impl PerfData {
    /// Call `f` for every sample of this file (every event, file order).
    pub fn for_each_sample(
        &self,
        mut visit: impl FnMut(&RawSample<'_>),
    ) -> Result<(), PerfDataError> {
        let mut ips: Vec<u64> = Vec::with_capacity(128);
        for record in self.records() {
            let record = record?;
            if record.kind != record::SAMPLE {
                continue;
            }
            let Some(attr) = self.attr_of(&record) else {
                continue;
            };
            let Some(attr_info) = self.attrs().get(attr) else {
                continue;
            };
            let Some(sample) = record::parse_sample(record.body, attr_info, self.endian()) else {
                continue;
            };
            ips.clear();
            match sample.callchain {
                Some(raw) if attr_info.has(sample::CALLCHAIN) => {
                    ips.extend(callchain_entries(raw, self.endian()).filter(|&ip| ip < CONTEXT_MAX))
                }
                _ => ips.push(sample.ip),
            }
            visit(&RawSample {
                ips: &ips,
                weight: sample.period.unwrap_or(1),
                pid: sample.pid,
                tid: sample.tid,
                attr,
            });
        }
        Ok(())
    }

    /// The raw body of header feature section `id`, as perf wrote it (for example
    /// [`feature::BPF_PROG_INFO`](super::feature::BPF_PROG_INFO) = 25,
    /// [`feature::BPF_BTF`](super::feature::BPF_BTF) = 26); `None` when absent.
    pub fn feature_section(&self, id: u32) -> Option<&[u8]> {
        self.feature(id)
    }
}

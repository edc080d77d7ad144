//! The two plots `overhead` draws, from seeded synthetic rounds, for a look in a browser
//! (`scripts/svg-screenshots.sh` renders them): the latency CDFs of `overhead --plot` and the
//! sweep of `overhead --sweep --plot`, shaped as a real sweep across a cache's capacity is (two
//! neighbouring points with a full map, a noisy p99).
//!
//! ```text
//! cargo run --example plots -- DIR    # writes DIR/cdf.svg and DIR/sweep.svg
//! ```

use ebpf_prof::plot::{cdf_svg, sweep_svg, CdfSeries, PlotOptions, SweepPlot, SweepPoint};
use ebpf_prof::stats::rng::Rng;
use std::path::PathBuf;

/// Latencies of one arm: a level, an exponential body, and one slow reading in fifty.
fn latencies(rng: &mut Rng, level: f64, count: usize) -> Vec<u64> {
    (0..count)
        .map(|index| {
            let tail = if index % 50 == 0 { 4000.0 } else { 0.0 };
            (level + tail + 120.0 * -rng.uniform().ln()) as u64
        })
        .collect()
}

fn cdf(rng: &mut Rng) -> String {
    let series = [
        CdfSeries {
            label: "baseline (base)".into(),
            samples: latencies(rng, 1840.0, 6000),
        },
        CdfSeries {
            label: "attached: verdict_cache.bpf.o (treat)".into(),
            samples: latencies(rng, 2050.0, 6000),
        },
    ];
    cdf_svg(
        &series,
        &PlotOptions {
            title: "ebpf-prof overhead: 250 openats of /etc/hostname".into(),
            legend_note: "Δp50 +212 ns [+196, +228]; Δp99 +410 ns [+380, +440]".into(),
        },
    )
}

fn sweep() -> String {
    // (paths, p50 delta, p99 delta, maps full there)
    let shape: [(usize, f64, f64, &[&str]); 6] = [
        (64, 150.0, 2600.0, &[]),
        (256, 160.0, 900.0, &[]),
        (1024, 170.0, 4100.0, &[]),
        (4096, 640.0, 1500.0, &["verdict_cache"]),
        (8192, 700.0, 5200.0, &["verdict_cache", "path_seen"]),
        (16384, 720.0, 2300.0, &["verdict_cache", "path_seen"]),
    ];
    let points = shape
        .iter()
        .map(|&(value, p50, p99, full)| SweepPoint {
            value,
            p50: Some((p50, p50 - 25.0, p50 + 25.0)),
            p99: Some((p99, p99 * 0.4, p99 * 1.8)),
            full_maps: full.iter().map(|name| name.to_string()).collect(),
        })
        .collect();
    sweep_svg(&SweepPlot {
        title: "ebpf-prof overhead sweep: baseline vs verdict_cache.bpf.o".into(),
        param: "paths".into(),
        confidence: 0.99,
        points,
    })
}

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    let mut rng = Rng::new(34);
    std::fs::write(dir.join("cdf.svg"), cdf(&mut rng))?;
    std::fs::write(dir.join("sweep.svg"), sweep())?;
    Ok(())
}

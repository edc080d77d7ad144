use ebpf_prof::plot::{cdf_svg, CdfSeries, PlotOptions};
use ebpf_prof::stats::rng::Rng;
use ebpf_prof::stats::{compare, verdict, CompareOptions};
fn main() {
    let shift: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(212.0);
    let seed: u64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let mut rng = Rng::new(seed);
    let mut one = |plus: f64| -> u64 {
        let u: f64 = rng.uniform();
        let w = -(u.ln());
        let mut ns = 1050.0 + plus + 150.0 * w.powf(0.8) + 2.0 * ((0.8 * w).exp() - 1.0);
        if rng.uniform() < 2e-5 {
            ns = 1e4 * 500f64.powf(rng.uniform());
        }
        ((ns / 10.0).floor() * 10.0) as u64
    };
    let base: Vec<Vec<u64>> = (0..5)
        .map(|_| (0..90_000).map(|_| one(0.0)).collect())
        .collect();
    let treat: Vec<Vec<u64>> = (0..5)
        .map(|_| (0..90_000).map(|_| one(shift)).collect())
        .collect();
    let c = compare(&base, &treat, &CompareOptions::default());
    let v = verdict(&c, 10.0);
    eprintln!("{v}");
    eprintln!("{}", ebpf_prof::stats::gate_ns(&c, 50.0, 100.0).message);
    eprintln!("{}", ebpf_prof::stats::gate_pct(&c, 99.0, 10.0).message);
    eprintln!("{:?}", c.notes);
    eprintln!("{:?}", c.rank_test);
    let note = format!(
        "Δp50 {:+.0} ns [{:.0}, {:.0}]; Δp99 {:+.0} ns [{:.0}, {:.0}]",
        c.diffs[0].delta,
        c.diffs[0].lo,
        c.diffs[0].hi,
        c.diffs[2].delta,
        c.diffs[2].lo,
        c.diffs[2].hi
    );
    let s = [
        CdfSeries {
            label: "baseline".into(),
            samples: base.concat(),
        },
        CdfSeries {
            label: "attached <kprobe/do_sys_openat2>".into(),
            samples: treat.concat(),
        },
    ];
    print!(
        "{}",
        cdf_svg(
            &s,
            &PlotOptions {
                title: "openat latency: baseline vs hook attached".into(),
                legend_note: note
            }
        )
    );
}
#[allow(dead_code)]
fn unused() {}

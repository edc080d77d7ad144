//! The one SVG plotter: self-contained documents (no scripts, fonts or files), text escaped,
//! one palette and one set of axis helpers for every plot the tool draws — the latency CDFs of
//! `overhead --plot` ([`cdf`]) and the sweep of `overhead --sweep --plot` ([`sweep`]).

mod axis;
pub mod cdf;
pub mod sweep;
#[cfg(test)]
mod tests;
mod text;

pub use cdf::{cdf_svg, CdfSeries, PlotOptions};
pub use sweep::{sweep_svg, SweepPlot, SweepPoint};

/// Baseline blue, attached orange, then more distinct colours (colour-blind safe order).
pub(crate) const COLORS: [&str; 6] = [
    "#3b6fb6", "#e07b28", "#2a9d5b", "#c0392b", "#8e6bbf", "#7f7f7f",
];

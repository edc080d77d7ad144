//! The rig of a real measurement: the two arms (objects loaded into the running kernel, a
//! user's loader, or nothing), the pinned benchmark (the built-in one served by one process),
//! the maps read after every attached round, and the signals that end the run. The engine of
//! [`super::rounds`] drives it.

use super::arms::{Arm, ArmSpec, Engaged};
use super::pressure::{self, RoundMaps};
use super::rounds::{progress_line, BlockTimes, Progress, Rig, Side};
use super::runner::{BenchRun, Served};
use crate::signals::Interrupts;
use crate::stats::LoadOrder;
use anyhow::Result;
use std::time::{Duration, Instant};

/// How often the progress line on a terminal is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// The arms, the benchmark, and what the rounds collect besides their samples.
pub struct MachineRig<'a> {
    arms: [&'a mut Arm; 2],
    specs: [&'a ArmSpec; 2],
    bench: &'a BenchRun,
    server: Option<Served>,
    /// Maps of programs someone else loaded, read after every attached round.
    watch: &'a [u32],
    /// The maps after each attached round.
    pub maps: Vec<RoundMaps>,
    ints: &'a Interrupts,
    start: Instant,
    progress_line: crate::perf::script::ProgressLine,
    last_shown: Instant,
    /// The treatment's loader, kept running for a block of rounds.
    held: Option<Engaged<'static>>,
}

/// A loader whose start takes more than this share of a round is kept running for blocks of
/// rounds: started for every round, it would spend the budget starting.
const SLOW_START_SHARE: f64 = 0.1;

impl<'a> MachineRig<'a> {
    /// A rig of prepared `arms` (as `specs` describe them) and `bench`, started now; the
    /// built-in bench starts serving rounds.
    pub fn new(
        arms: [&'a mut Arm; 2],
        specs: [&'a ArmSpec; 2],
        (bench, watch): (&'a BenchRun, &'a [u32]),
        ints: &'a Interrupts,
    ) -> Result<MachineRig<'a>> {
        let start = Instant::now();
        Ok(MachineRig {
            arms,
            specs,
            server: bench.serve()?,
            bench,
            watch,
            maps: Vec::new(),
            ints,
            start,
            progress_line: crate::perf::script::ProgressLine::new(),
            last_shown: start,
            held: None,
        })
    }

    /// The arms in the order `order` loads them.
    fn in_order(&mut self, order: LoadOrder) -> [usize; 2] {
        match order {
            LoadOrder::TreatFirst => [1, 0],
            LoadOrder::BaseFirst | LoadOrder::OneObject => [0, 1],
        }
    }
}

impl Rig for MachineRig<'_> {
    fn prepared(&self) -> Option<LoadOrder> {
        match [self.arms[0].loads_object(), self.arms[1].loads_object()] {
            [true, true] => Some(LoadOrder::BaseFirst),
            [false, false] => None,
            _ => Some(LoadOrder::OneObject),
        }
    }

    fn reload(&mut self, order: LoadOrder) -> Result<()> {
        self.ints.check()?;
        // Both unloaded first, so that the one loaded first in this order is not placed
        // beside the other's previous load.
        for arm in self.arms.iter_mut() {
            arm.unload()?;
        }
        for index in self.in_order(order) {
            self.arms[index].load(self.specs[index])?;
        }
        Ok(())
    }

    fn wants_blocks(&mut self) -> Result<Option<BlockTimes>> {
        let started = Instant::now();
        let Some(loader) = self.arms[1].start_loader()? else {
            return Ok(None);
        };
        loader.disengage()?;
        // A hold of the loader: its start, its programs' load and its stop.
        let start = started.elapsed();
        let round_began = Instant::now();
        self.round(Side::Base, 0)?;
        let round = round_began.elapsed();
        let slow = start.as_secs_f64() > SLOW_START_SHARE * round.as_secs_f64();
        if slow {
            crate::out::say(format!(
                "{} took {:.2} s to start, load its programs and stop, {:.0} rounds' worth: it is kept running for a block of rounds in each load, the blocks' order drawn by the coin",
                self.specs[1].label(),
                start.as_secs_f64(),
                start.as_secs_f64() / round.as_secs_f64().max(1e-9)
            ));
        }
        Ok(slow.then_some(BlockTimes { hold: start, round }))
    }

    fn hold(&mut self, side: Side) -> Result<()> {
        if side == Side::Treat {
            self.ints.check()?;
            self.held = self.arms[1].start_loader()?;
        }
        Ok(())
    }

    fn release(&mut self, side: Side) -> Result<()> {
        match self.held.take() {
            Some(loader) if side == Side::Treat => loader.disengage(),
            _ => Ok(()),
        }
    }

    fn round(&mut self, side: Side, pair: usize) -> Result<Vec<u64>> {
        self.ints.check()?;
        if let (Side::Treat, Some(held)) = (side, self.held.as_ref()) {
            let ids = held.map_ids();
            return held_round(
                (side, pair),
                (self.bench, self.server.as_mut()),
                (&ids, self.watch),
                &mut self.maps,
            )
            .or_else(|e| self.ints.check().and(Err(e)));
        }
        let index = match side {
            Side::Base => 0,
            Side::Treat => 1,
        };
        let ints = self.ints;
        // A round cut short by a signal is the signal's doing: say that.
        let (samples, maps) = one_round(
            self.arms[index],
            (side, pair),
            (self.bench, self.server.as_mut()),
            self.watch,
        )
        .or_else(|e| ints.check().and(Err(e)))?;
        self.maps.extend(maps);
        Ok(samples)
    }

    fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    fn shows_progress(&mut self) -> bool {
        self.progress_line.enabled() && self.last_shown.elapsed() >= PROGRESS_EVERY
    }

    fn progress(&mut self, status: &Progress) {
        self.last_shown = Instant::now();
        self.progress_line
            .draw(&format!("{}   ", progress_line(status)));
    }
}

/// One round of an arm kept as it is across a block (its maps `map_ids`): run the bench, read
/// the maps into `maps`.
fn held_round(
    (side, pair): (Side, usize),
    (bench, server): (&BenchRun, Option<&mut Served>),
    (map_ids, watch): (&[u32], &[u32]),
    maps: &mut Vec<RoundMaps>,
) -> Result<Vec<u64>> {
    let label = format!("{} {pair}", side.name());
    let samples = match server {
        Some(s) => s.round(&label)?,
        None => bench.run(&label)?,
    };
    let mut ids = map_ids.to_vec();
    ids.extend_from_slice(watch);
    if !ids.is_empty() {
        maps.push(pressure::read(side.name(), pair, &ids)?);
    }
    Ok(samples)
}

/// One round of one arm: bring it about, run the bench, read the maps, undo it.
fn one_round(
    arm: &mut Arm,
    (side, pair): (Side, usize),
    (bench, server): (&BenchRun, Option<&mut Served>),
    watch: &[u32],
) -> Result<(Vec<u64>, Option<RoundMaps>)> {
    let engaged = arm.engage()?;
    if side == Side::Treat {
        crate::failpoint::hit("overhead:attached");
    }
    let label = format!("{} {pair}", side.name());
    let samples = match server {
        Some(s) => s.round(&label),
        None => bench.run(&label),
    };
    let mut ids = engaged.map_ids();
    ids.extend_from_slice(watch);
    let maps = if ids.is_empty() {
        None
    } else {
        Some(pressure::read(side.name(), pair, &ids)?)
    };
    engaged.disengage()?;
    Ok((samples?, maps))
}

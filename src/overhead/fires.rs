//! Which operation fires the hook, and whether it does: `--op auto` reads the programs' attach
//! points (an object's sections, or the kernel's links of a loader's programs after starting it
//! once) and picks the operation; before the latency rounds a short round with run stats on
//! counts the programs' runs per timed operation, and below [`ran::FIRES_FROM`] says so at the
//! start, with the operation that would fire them.

use super::arms::{Arm, ArmSpec};
use super::kstats::{self, ProgramView};
use super::ran::{self, Ran};
use super::runner::BenchRun;
use super::OverheadOptions;
use crate::bench::choose::{Chosen, OpChoice};
use crate::bpf;
use crate::out::say;
use crate::signals::Interrupts;
use anyhow::Result;

/// Iterations of the built-in bench in the check before measuring: enough that a loader's or
/// the bench's own start-up calls (a few dozen) move runs per operation by a few hundredths.
pub const CHECK_ITERATIONS: usize = 1_000;

/// The options with the operation resolved (`--op auto`: from the arms' programs), and the
/// choice; `None` with a benchmark of one's own (which makes its own operation) and for `--aa`.
/// The choice is said on stderr; an `--op` that fires none of the programs is a warning.
pub fn resolve(
    o: &OverheadOptions,
    specs: (&ArmSpec, &ArmSpec),
) -> Result<(OverheadOptions, Option<Chosen>)> {
    refuse_op_with_own_bench(o)?;
    if !o.bench.is_empty() {
        return Ok((o.clone(), None));
    }
    let Some(points) = attach_points(o, specs)? else {
        return Ok((o.clone(), None));
    };
    let (op, chosen) = bpf::choice::for_points(&points, &o.op, o.op_choice, &o.path);
    say(chosen.line());
    Ok((o.with_op(op, o.op_choice), Some(chosen)))
}

/// `--op` with a benchmark of one's own: refused, it makes its own operation.
pub fn refuse_op_with_own_bench(o: &OverheadOptions) -> Result<()> {
    crate::bench::choose::refuse_op_with_own_bench(o.op_choice, o.op.operation(), &o.bench)
}

/// The attach points of the arms' programs, by program: the objects' sections; a loader's
/// programs' links, after starting it once, only when the operation is to be chosen from them
/// (or `--side-cost` needs them).
fn attach_points(
    o: &OverheadOptions,
    specs: (&ArmSpec, &ArmSpec),
) -> Result<Option<Vec<(String, String)>>> {
    let mut points = Vec::new();
    let mut any = false;
    for spec in [specs.0, specs.1] {
        if let Some(source) = spec.object() {
            any = true;
            for p in bpf::object_programs(source)? {
                if !points.contains(&p) {
                    points.push(p);
                }
            }
            continue;
        }
        match spec {
            ArmSpec::Detached | ArmSpec::InMemory(_) => {}
            // Its points are needed to choose the operation, or the unrelated one of
            // --side-cost; a loader is slow to start, so not otherwise.
            ArmSpec::Command(_)
                if o.op_choice == OpChoice::Given && o.side_cost == super::SideCost::Skip => {}
            ArmSpec::Command(loader) => {
                any = true;
                say(format!(
                    "starting {} once to read where its programs attach",
                    loader.label()
                ));
                points.extend(loader_points(spec)?);
            }
        }
    }
    Ok(any.then_some(points))
}

/// Start the loader of `spec`, read its programs' attach points from the kernel's links, stop it.
fn loader_points(spec: &ArmSpec) -> Result<Vec<(String, String)>> {
    let mut arm = Arm::prepare(spec)?;
    let engaged = arm.engage()?;
    let points = bpf::choice::loaded_points(&engaged.program_ids());
    engaged.disengage()?;
    points
}

/// The check before measuring: a short round with run stats on for each attached arm, its
/// programs' runs per timed operation; said at the start when under [`ran::FIRES_FROM`].
pub fn check(
    arms: [&mut Arm; 2],
    bench: &BenchRun,
    chosen: Option<&Chosen>,
    ints: &Interrupts,
) -> Result<Vec<ProgramView>> {
    let iterations = CHECK_ITERATIONS;
    let short = bench.with_iterations(iterations);
    let mut all = Vec::new();
    for (i, arm) in arms.into_iter().enumerate() {
        if matches!(arm, Arm::Detached) {
            continue;
        }
        let name = if i == 0 { "base" } else { "treat" };
        let (_, views) = kstats::arm_view(arm, &short, (1, iterations), name, ints)?;
        let refs: Vec<&ProgramView> = views.iter().collect();
        let ran = ran::of(
            &refs,
            &op_name(bench, chosen),
            "the check before measuring",
            chosen,
        );
        // Where the attach points read and the count disagree, the count wins and is said.
        // Otherwise an --op given that fires none of the programs was said before (or is the
        // point of --side-cost's second measurement).
        let said = chosen.is_some_and(|c| c.by == OpChoice::Given && c.fired.is_empty());
        if let Some(line) = ran::reconcile(chosen, &ran) {
            say(format!("warning: {line} ({name} arm)"));
        } else if ran.inside != ran::Inside::Ran && !said {
            say(format!(
                "warning: in a short round with run stats on ({name} arm), {}",
                ran.sentence
            ));
        }
        all.extend(views);
    }
    Ok(all)
}

/// The timed operation's name for sentences.
pub fn op_name(bench: &BenchRun, chosen: Option<&Chosen>) -> String {
    match (bench.builtin, chosen) {
        (true, Some(c)) => c.op.name().to_string(),
        (true, None) => "operation".into(),
        (false, _) => "iteration of your benchmark".into(),
    }
}

/// What ran inside the timed operation, for the verdict: from the stats rounds when there
/// were any, else from the check before measuring; for the attached arm (both with
/// `--compare`, the treatment's).
pub fn what_ran(
    kernel: &[ProgramView],
    checked: &[ProgramView],
    bench: &BenchRun,
    chosen: Option<&Chosen>,
) -> Option<Ran> {
    let (views, counted_by) = if kernel.is_empty() {
        (checked, "the check before measuring")
    } else {
        (kernel, "stats rounds")
    };
    let treat: Vec<&ProgramView> = views.iter().filter(|p| p.arm == "treat").collect();
    if treat.is_empty() {
        return None;
    }
    let mut ran = ran::of(&treat, &op_name(bench, chosen), counted_by, chosen);
    ran.correction = ran::reconcile(chosen, &ran);
    Some(ran)
}

//! The operation to time for a hook: its programs' attach points read from the object's ELF
//! sections (without loading it), or from where the kernel has them attached (links, perf
//! events, cgroups) for programs someone else loaded,
//! then `bench::choose`.

use super::{inventory, loader, ObjectSource};
use crate::bench::choose::{self, Chosen, OpChoice};
use crate::bench::OpKind;
use std::path::Path;

/// The operation for the programs `points` (name, attach point): `op` as given, or with
/// `--op auto` (or no `--op`) the one that fires them, working on `path` if it takes a file;
/// with why.
pub fn for_points(
    points: &[(String, String)],
    op: &OpKind,
    by: OpChoice,
    path: &Path,
) -> (OpKind, Chosen) {
    match by {
        OpChoice::Given => {
            let reach = choose::choose(points).programs;
            (op.clone(), choose::given(op.operation(), by, reach))
        }
        OpChoice::Auto | OpChoice::Default => {
            let mut chosen = choose::choose(points);
            chosen.by = by;
            (OpKind::new(chosen.op, path.to_path_buf()), chosen)
        }
    }
}

/// The operation for the object `src`, as [`for_points`] chooses from its sections.
pub fn for_object(
    src: ObjectSource<'_>,
    op: &OpKind,
    by: OpChoice,
    path: &Path,
) -> anyhow::Result<(OpKind, Chosen)> {
    let points = loader::object_programs(src)?;
    Ok(for_points(&points, op, by, path))
}

/// The attach points of the loaded programs `ids`, one pair per point, as
/// [`super::attachments`] finds them; a program attached nowhere has one pair with an empty
/// point (`bench::choose` reads it as attached nowhere).
pub fn loaded_points(ids: &[u32]) -> anyhow::Result<Vec<(String, String)>> {
    let all = inventory::programs(&[], false)?;
    Ok(all
        .into_iter()
        .filter(|p| ids.contains(&p.id))
        .flat_map(|p| points_of_program(&p))
        .collect())
}

/// (name, point) for each point of `program`; (name, "") when it has none.
fn points_of_program(program: &inventory::Program) -> Vec<(String, String)> {
    match program.attach_points.is_empty() {
        true => vec![(program.name.clone(), String::new())],
        false => program
            .attach_points
            .iter()
            .map(|point| (program.name.clone(), point.clone()))
            .collect(),
    }
}

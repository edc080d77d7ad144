//! The only code that runs perf: locating the version-matched binary, building the `record`
//! argv (a pure function), running `record` and `script`.

pub mod locate;
mod probe;
pub mod record;
pub mod script;
mod trust;
pub mod version;

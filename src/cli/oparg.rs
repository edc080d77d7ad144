//! `--op`: an operation of the built-in bench (`bench`), or `auto` as well (`overhead`,
//! `record`, `demo`), with a one-line error that names them all and each value's help for the
//! completions and the man page.

use crate::bench::Operation;
use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::ErrorKind;
use std::ffi::OsStr;

/// `--op` of `overhead`, `record` and `demo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpArg {
    /// Chosen from the object's attach points.
    Auto,
    /// The operation named.
    Named(Operation),
}

/// The parser of `--op`; with `auto`, `auto` is a value too.
#[derive(Debug, Clone, Copy)]
pub struct OpParser {
    auto: bool,
}

impl OpParser {
    /// Operations and `auto`.
    pub const WITH_AUTO: OpParser = OpParser { auto: true };
    /// Operations only (`bench`: there is no object to choose from).
    pub const NAMED: OpParser = OpParser { auto: false };

    fn parse_text(self, text: &str) -> Result<OpArg, String> {
        if self.auto && text == "auto" {
            return Ok(OpArg::Auto);
        }
        if let Some(op) = Operation::from_name(text) {
            return Ok(OpArg::Named(op));
        }
        let names: Vec<&str> = Operation::ALL.iter().map(|o| o.name()).collect();
        let auto = if self.auto { "auto, or " } else { "" };
        Err(format!(
            "--op {text:?} is not an operation: give {auto}one of {}",
            names.join(", ")
        ))
    }
}

impl TypedValueParser for OpParser {
    type Value = OpArg;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<OpArg, clap::Error> {
        self.parse_text(&value.to_string_lossy())
            .map_err(|why| clap::Error::raw(ErrorKind::InvalidValue, format!("{why}\n")))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        let auto = self.auto.then(|| {
            PossibleValue::new("auto").help("the operation that fires the object's programs")
        });
        let ops = Operation::ALL
            .into_iter()
            .map(|o| PossibleValue::new(o.name()).help(o.what()));
        Some(Box::new(auto.into_iter().chain(ops)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_the_one_line_refusal() {
        assert_eq!(OpParser::WITH_AUTO.parse_text("auto"), Ok(OpArg::Auto));
        assert_eq!(
            OpParser::NAMED.parse_text("exec"),
            Ok(OpArg::Named(Operation::Exec))
        );
        let e = OpParser::NAMED.parse_text("auto").unwrap_err();
        assert!(
            e.starts_with("--op \"auto\" is not an operation: give one of openat, connect, exec"),
            "{e}"
        );
        let e = OpParser::WITH_AUTO.parse_text("frob").unwrap_err();
        assert!(e.contains("give auto, or one of"), "{e}");
        assert_eq!(e.lines().count(), 1);
        let n = OpParser::WITH_AUTO.possible_values().unwrap().count();
        assert_eq!(n, Operation::ALL.len() + 1);
    }
}

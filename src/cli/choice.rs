//! The value parser of the flags whose values are a library enum's (the libraries
//! know no clap).

use std::ffi::OsStr;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

/// The value parser of a flag that takes one of a library enum's values: `all` in
/// the order the flag lists them, `value` how each is listed and matched (its name,
/// with help and aliases where it has them). It lists, completes, accepts and refuses
/// exactly as clap's `ValueEnum` parser does, so the libraries need no clap.
pub(super) fn choice<T>(all: &'static [T], value: fn(T) -> PossibleValue) -> Choice<T>
where
    T: Copy + Send + Sync + 'static,
{
    Choice { all, value }
}

/// See [`choice`].
#[derive(Clone)]
pub(super) struct Choice<T: 'static> {
    all: &'static [T],
    value: fn(T) -> PossibleValue,
}

impl<T: Copy + Send + Sync + 'static> TypedValueParser for Choice<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        // clap builds the error (with its list and its "similar value" tip). A value
        // that is not UTF-8 goes in as its lossy form, which matches nothing: refused
        // as an invalid value like any other, not as invalid UTF-8.
        let given = value.to_string_lossy();
        let names = PossibleValuesParser::new(self.all.iter().map(|&v| (self.value)(v)));
        let given = names.parse_ref(cmd, arg, OsStr::new(given.as_ref()))?;
        let ignore_case = arg.is_some_and(clap::Arg::is_ignore_case_set);
        Ok(self
            .all
            .iter()
            .copied()
            .find(|&v| (self.value)(v).matches(&given, ignore_case))
            .expect("the parser accepted one of these values"))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.all.iter().map(|&v| (self.value)(v))))
    }
}

//! What the recorder tells the user while it records: handed to a sink the command supplies,
//! as it happens (some must come before the program's own output), instead of printed here.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// What is happening or what was done.
    Info,
    /// Something the user may want to know (a caveat, a fallback).
    Note,
    /// Something asked for did not work out.
    Warning,
}

/// What a notice is about, so that a command that records many runs (`scale`) can keep only
/// some.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum About {
    /// Setting up: the back end chosen, the wrapper, the generator.
    Setup,
    /// The sampler and the sched tracepoints.
    Sampling,
    /// Hardware and software counters that could not be opened.
    Counters,
    /// The recording's end: notes of the launcher, the signal, what was recorded.
    Outcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub level: Level,
    pub about: About,
    pub text: String,
}

impl Notice {
    pub fn new(level: Level, about: About, text: impl Into<String>) -> Notice {
        Notice {
            level,
            about,
            text: text.into(),
        }
    }
}

/// `note: TEXT`, `warning: TEXT` or `TEXT`: the command puts its name before it.
impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.level {
            Level::Info => f.write_str(&self.text),
            Level::Note => write!(f, "note: {}", self.text),
            Level::Warning => write!(f, "warning: {}", self.text),
        }
    }
}

/// Where notices go.
pub type Sink<'a> = &'a mut dyn FnMut(Notice);

pub(crate) fn info(sink: &mut dyn FnMut(Notice), about: About, text: impl Into<String>) {
    sink(Notice::new(Level::Info, about, text));
}

pub(crate) fn note(sink: &mut dyn FnMut(Notice), about: About, text: impl Into<String>) {
    sink(Notice::new(Level::Note, about, text));
}

pub(crate) fn warn(sink: &mut dyn FnMut(Notice), about: About, text: impl Into<String>) {
    sink(Notice::new(Level::Warning, about, text));
}

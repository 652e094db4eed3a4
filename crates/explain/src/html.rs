//! The page `contend report RUN --html FILE` writes: [`Run::page`] lends the model's sections
//! (the very values `--json` serialises through [`crate::json::RunJson`]) to
//! `report::html`, which renders them; nothing is analysed again.

use crate::Run;

impl Run {
    /// The run's sections as `report::html` renders them, with the loader's notices.
    pub fn page(&self, options: report::html::Options) -> report::html::Page<'_> {
        report::html::Page {
            summary: &self.summary,
            topology: self.meta.topology.as_ref().map(|t| &t.summary),
            activity: self.activity.as_ref().map(|a| &a.view),
            thread_states: self.activity.as_ref().map_or(&[], |a| &a.states),
            thread_seen_until: self.activity.as_ref().map_or_else(Vec::new, |a| {
                a.threads
                    .iter()
                    .filter_map(|t| {
                        let last_sample = t.samples.iter().map(|s| s.ts).max();
                        last_sample.max(t.last_seen).map(|u| (t.tid, u))
                    })
                    .collect()
            }),
            locks: self.locks.as_ref().map(|l| report::html::LocksPage {
                report: &l.report,
                naming: &l.naming,
                coverage: &l.coverage,
            }),
            locks_not_measured: self.locks_not_measured(),
            waits: self.waits.as_ref().map(|w| report::html::WaitsPage {
                report: &w.report,
                names: &w.names,
                thread_names: &w.thread_names,
                ends_traced: w.ends_traced,
                stacks_recorded: w.stacks_recorded,
                stacks: &w.stacks,
            }),
            waits_not_measured: self.waits_not_measured(),
            folded: self.wait_profile().map_or_else(Vec::new, |p| {
                // The options are the profile's own: `fold` fails on nothing else.
                export::folded::fold(&p, &folded_options(&p)).unwrap_or_default()
            }),
            off_cpu: self.off_cpu_blocked(),
            mpi: self.mpi.as_ref().map(|m| report::html::MpiPage {
                run: &m.run,
                site_names: &m.site_names,
            }),
            sharing: self.sharing.as_ref().map(crate::sharing::Sharing::page),
            notices: self.notices.iter().map(|n| n.0.clone()).collect(),
            options,
        }
    }
}

impl Run {
    /// The wait time by call stack, as one profile (`report --pprof` and `--folded` write it,
    /// the page draws it as a flame graph): the probe's lock waits per call site under
    /// `[lock NAME]`, and the futex waits with their unwound user stacks under
    /// `[futex wait WORD KIND]`. `None` when the run has neither.
    pub fn wait_profile(&self) -> Option<export::pprof::Profile> {
        let wait_samples = self.waits.as_ref().map_or_else(Vec::new, |w| {
            report::waits::profile_samples(&w.report, &w.stacks, &w.names)
        });
        if self.locks.is_none() && wait_samples.is_empty() {
            return None;
        }
        let mut profile = match &self.locks {
            Some(l) => report::lock_exports::profile(&l.report, &l.naming),
            None => export::pprof::Profile::lock_contention(),
        };
        if !wait_samples.is_empty() {
            profile.comments.push(
                "contend futex waits: blocked futex waits from their user stacks, rooted at [futex wait WORD KIND]".into(),
            );
            profile.samples.extend(wait_samples);
        }
        Some(profile)
    }
}

/// How `report --folded` folds the wait profile, and the page's flame graph with it: the
/// wait time (`delay`), each frame with its file:line.
pub fn folded_options(profile: &export::pprof::Profile) -> export::folded::Options {
    export::folded::Options {
        value_index: profile.value_index("delay").unwrap_or(1),
        module: false,
        file_line: true,
    }
}

impl crate::sharing::Sharing {
    /// The sharing section as `report::html` renders it (in the run's page, and alone for
    /// `contend c2c report --html`).
    pub fn page(&self) -> report::html::SharingPage<'_> {
        report::html::SharingPage {
            report: &self.report,
            processes: &self.processes,
            naming: &self.naming,
        }
    }
}

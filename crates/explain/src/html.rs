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
            }),
            waits_not_measured: self.waits_not_measured(),
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

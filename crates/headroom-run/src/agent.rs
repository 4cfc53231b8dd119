//! What an agent does with a job (`headroom agent`): build the plan from the job's spec with
//! the one builder, take its execution segment, check it can run here, say it is ready, wait
//! for the controller's start instant and run it on this process's engine, streaming every
//! interval back. The transport is `headroom_dist`'s; the spec carries every file as bytes, so
//! nothing here reads this machine's disk.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use headroom_core::{Plan, Segment};
use headroom_dist::Job;

use crate::preflight::{check_fd_budget_share, preflight};

/// The runner `headroom_dist::serve_agent` calls for each job.
pub fn runner() -> headroom_dist::Runner {
    Arc::new(|job, stop, ready, sink| run_job(job, stop, ready, sink).map_err(|e| format!("{e:#}")))
}

fn run_job(
    job: Job,
    stop: Arc<AtomicBool>,
    ready: &mut dyn FnMut(u32),
    sink: &mut dyn FnMut(&headroom_engine::Interval<'_>),
) -> anyhow::Result<headroom_engine::RunOutcome> {
    let plan = plan_from_job(&job)?;
    ready(plan.threads as u32);
    Ok(headroom_engine::run(&plan, stop, sink)?)
}

/// The plan an agent runs for `job`: built from the job's spec by the one builder (as
/// `headroom run` builds its own), with its segment and start instant, checked (and
/// preflighted if the controller asks).
pub fn plan_from_job(job: &Job) -> anyhow::Result<Plan> {
    let mut plan = crate::build(&job.spec)?.plan;
    plan.segment = Segment {
        index: job.segment_index,
        count: job.segment_count,
    };
    plan.start_at = Some(job.start_at);
    plan.validate()?;
    check_fd_budget_share(&plan)?;
    if job.preflight {
        preflight(&plan)?;
    }
    Ok(plan)
}

/// The job every agent is sent for `spec`: with the threads the controller's plan has, since
/// segments are split over agent x thread slots and every agent must run the same number.
pub fn job_for(spec: &headroom_core::spec::RunSpec, plan: &Plan, preflight: bool) -> Job {
    let mut spec = spec.clone();
    spec.threads = Some(plan.threads);
    Job {
        spec,
        preflight,
        segment_index: 0,
        segment_count: 1,
        start_at: std::time::SystemTime::now(),
    }
}

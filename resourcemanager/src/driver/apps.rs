//! The application families: a client's calls on applications, and the
//! ApplicationMasterProtocol.

use tracing::info;

use super::command::{AmCommand, AppCommand};
use super::{Driver, Durability, RmError};
use crate::wire;

impl Driver {
    pub(super) fn app(&mut self, cmd: AppCommand, now: u64) {
        match cmd {
            AppCommand::NewApplication(reply) => {
                let r = Ok((self.core.new_application(), self.core.max_allocation()));
                self.settle_and_reply(r, Durability::Logged, reply);
            }
            AppCommand::Submit(id, sub, reply) => {
                let r = self.core.submit(id, *sub, now).map_err(RmError::from);
                self.settle_and_reply(r, Durability::Required, reply);
            }
            AppCommand::Kill(id, caller, reply) => {
                let r = self.core.kill(&id, &caller, now).map_err(RmError::from);
                self.settle_and_reply(r, Durability::Required, reply);
            }
            AppCommand::MoveApp {
                id,
                queue,
                caller,
                reply,
            } => {
                let r = self.core.move_app(&id, &queue, &caller, now);
                if let Ok(path) = &r {
                    info!(app_id = %id, user = %caller.user, "application moved to queue {path}");
                }
                self.settle_and_reply(r.map_err(RmError::from), Durability::Required, reply);
            }
            AppCommand::SetPriority {
                id,
                priority,
                caller,
                reply,
            } => {
                let r = self.core.set_priority(&id, priority, &caller, now);
                self.settle_and_reply(r.map_err(RmError::from), Durability::Required, reply);
            }
            AppCommand::UpdateLifetime {
                id,
                expiry,
                caller,
                reply,
            } => {
                let r = self.core.update_lifetime(&id, expiry, &caller, now);
                if let Ok(at) = &r {
                    info!(app_id = %id, user = %caller.user, "application lifetime set to end at {at} ms");
                }
                self.settle_and_reply(r.map_err(RmError::from), Durability::Required, reply);
            }
        }
    }

    /// An ApplicationMasterProtocol call checks the AM-RM token first and names the attempt
    /// in the command's span (see [`Driver::am_call`]).
    pub(super) fn am(&mut self, cmd: AmCommand, now: u64) {
        match cmd {
            AmCommand::Register {
                token,
                host,
                rpc_port,
                tracking_url,
                reply,
            } => {
                let r = self.am_call(&token, |core, att| {
                    let (max, queue) = core.am_register(att, host, rpc_port, tracking_url, now)?;
                    Ok((max, queue, wire::all(core.inherited_containers(att))))
                });
                self.settle_and_reply(r, Durability::Required, reply);
            }
            AmCommand::Allocate {
                token,
                response_id,
                asks,
                release,
                progress,
                report,
                reply,
            } => {
                // Allocate writes nothing the client must wait for: a store problem is logged.
                let r = self.am_call(&token, |core, att| {
                    core.am_allocate_with(att, response_id, asks, release, progress, report, now)
                });
                self.settle_and_reply(r, Durability::Logged, reply);
            }
            AmCommand::Finish {
                token,
                status,
                diagnostics,
                tracking_url,
                reply,
            } => {
                let r = self.am_call(&token, |core, att| {
                    core.am_finish(att, status, diagnostics, tracking_url, now)
                });
                self.settle_and_reply(r, Durability::Required, reply);
            }
            AmCommand::Launched(attempt, container, result) => {
                self.core.am_launched(&attempt, &container, result, now);
                let _ = self.settle();
            }
        }
    }
}

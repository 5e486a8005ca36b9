//! capdvp's Cluster API runtime extension (Runtime SDK, `hooks.runtime.cluster.x-k8s.io/v1alpha1`):
//! discovery and the in-place update hooks Deckhouse's capdvp registers (CanUpdateMachineSet,
//! CanUpdateMachine, UpdateMachine), under the same handler names.
//!
//! Layout: [`hooks`] (wire types and paths), [`inplace`] (what changes in place, pure),
//! [`answer`] (each hook's answer, pure), [`server`] (the HTTPS driver).

pub mod answer;
pub mod hooks;
pub mod inplace;
pub mod server;

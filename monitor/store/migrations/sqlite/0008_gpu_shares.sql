-- GPU shares, MIG instances and energy (MIG, time-sliced and MPS GPUs).
--
-- task_gpus.share is the fraction of the physical GPU the entry holds, as
-- the registration said it (1 when it did not; slices / total_slices for a
-- MIG entry without one). A MIG entry is the parent GPU's uuid with its
-- instance: mig_uuid, gpu_instance_id (NULL for a whole GPU: the claim key
-- is (uuid, gpu_instance_id)), compute_instance_id, mig_profile,
-- mig_slices, mig_total_slices. exclusive is 1 when the entry holds its
-- whole instance (share 1, or a MIG instance at its slices' share): such a
-- claim ends every older claim on the instance, a shared one only older
-- exclusive ones. energy_joules / energy_estimated are the completion's.
ALTER TABLE task_gpus ADD COLUMN share REAL NOT NULL DEFAULT 1;
ALTER TABLE task_gpus ADD COLUMN mig_uuid TEXT NOT NULL DEFAULT '';
ALTER TABLE task_gpus ADD COLUMN gpu_instance_id INTEGER;
ALTER TABLE task_gpus ADD COLUMN compute_instance_id INTEGER;
ALTER TABLE task_gpus ADD COLUMN mig_profile TEXT NOT NULL DEFAULT '';
ALTER TABLE task_gpus ADD COLUMN mig_slices INTEGER;
ALTER TABLE task_gpus ADD COLUMN mig_total_slices INTEGER;
ALTER TABLE task_gpus ADD COLUMN exclusive INTEGER NOT NULL DEFAULT 1;
ALTER TABLE task_gpus ADD COLUMN energy_joules REAL;
ALTER TABLE task_gpus ADD COLUMN energy_estimated INTEGER;
-- tasks.gpu_unlisted are the GPUs counted in gpu_count but not listed in
-- gpus (device nodes): they count with share 1 and the default price. The
-- report's GPU-hours are the listed GPUs' share × hours plus these × hours,
-- read from the task's own row.
ALTER TABLE tasks ADD COLUMN gpu_unlisted INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET gpu_unlisted = MAX(gpu_count - (SELECT COUNT(*) FROM task_gpus g WHERE g.task_key = tasks.id), 0);

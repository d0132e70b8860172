-- Day and month facts of the ledger (docs/cost.md, "Facts at three grains"),
-- kept by the node-report write path in the transaction that keeps the
-- hourly rows (node_gpu_hours, node_user_hours), with the same keys and the
-- hour replaced by the UTC day's (day) or the UTC month's (month) first
-- second. A user's facts keep the earliest and the latest report time of
-- their bucket (first_time, last_time): the registration a user is tied to
-- is decided at answering, and a bucket whose first and last report times
-- tie the same registration needs no hour of it.
CREATE TABLE node_gpu_days (
    day           INTEGER  NOT NULL,
    node          TEXT    NOT NULL,
    uuid          TEXT    NOT NULL,
    model         TEXT    NOT NULL DEFAULT '',
    observed_s    REAL    NOT NULL DEFAULT 0,
    unallocated_s REAL    NOT NULL DEFAULT 0,
    energy_j      REAL    NOT NULL DEFAULT 0,
    PRIMARY KEY (day, node, uuid)
);
CREATE TABLE node_user_days (
    day             INTEGER  NOT NULL,
    node            TEXT    NOT NULL,
    uuid            TEXT    NOT NULL,
    gpu_instance_id INTEGER  NOT NULL,
    user_key        TEXT    NOT NULL,
    model           TEXT    NOT NULL DEFAULT '',
    profile         TEXT    NOT NULL DEFAULT '',
    slices          INTEGER  NOT NULL DEFAULT 0,
    total_slices    INTEGER  NOT NULL DEFAULT 0,
    runtime         TEXT    NOT NULL DEFAULT '',
    container_id    TEXT    NOT NULL DEFAULT '',
    pod_uid         TEXT    NOT NULL DEFAULT '',
    namespace       TEXT    NOT NULL DEFAULT '',
    pod             TEXT    NOT NULL DEFAULT '',
    container       TEXT    NOT NULL DEFAULT '',
    slurm_job       TEXT    NOT NULL DEFAULT '',
    uid             INTEGER,
    cgroup          TEXT    NOT NULL DEFAULT '',
    declared        INTEGER  NOT NULL DEFAULT 0,
    declared_task_id TEXT   NOT NULL DEFAULT '',
    declared_project TEXT   NOT NULL DEFAULT '',
    declared_owner  TEXT    NOT NULL DEFAULT '',
    first_time      INTEGER  NOT NULL,
    last_time       INTEGER  NOT NULL,
    equal_s         REAL    NOT NULL DEFAULT 0,
    util_s          REAL    NOT NULL DEFAULT 0,
    busy_equal_s    REAL    NOT NULL DEFAULT 0,
    busy_util_s     REAL    NOT NULL DEFAULT 0,
    energy_j        REAL    NOT NULL DEFAULT 0,
    PRIMARY KEY (day, node, uuid, gpu_instance_id, user_key)
);
CREATE TABLE node_gpu_months (
    month         INTEGER  NOT NULL,
    node          TEXT    NOT NULL,
    uuid          TEXT    NOT NULL,
    model         TEXT    NOT NULL DEFAULT '',
    observed_s    REAL    NOT NULL DEFAULT 0,
    unallocated_s REAL    NOT NULL DEFAULT 0,
    energy_j      REAL    NOT NULL DEFAULT 0,
    PRIMARY KEY (month, node, uuid)
);
CREATE TABLE node_user_months (
    month           INTEGER  NOT NULL,
    node            TEXT    NOT NULL,
    uuid            TEXT    NOT NULL,
    gpu_instance_id INTEGER  NOT NULL,
    user_key        TEXT    NOT NULL,
    model           TEXT    NOT NULL DEFAULT '',
    profile         TEXT    NOT NULL DEFAULT '',
    slices          INTEGER  NOT NULL DEFAULT 0,
    total_slices    INTEGER  NOT NULL DEFAULT 0,
    runtime         TEXT    NOT NULL DEFAULT '',
    container_id    TEXT    NOT NULL DEFAULT '',
    pod_uid         TEXT    NOT NULL DEFAULT '',
    namespace       TEXT    NOT NULL DEFAULT '',
    pod             TEXT    NOT NULL DEFAULT '',
    container       TEXT    NOT NULL DEFAULT '',
    slurm_job       TEXT    NOT NULL DEFAULT '',
    uid             INTEGER,
    cgroup          TEXT    NOT NULL DEFAULT '',
    declared        INTEGER  NOT NULL DEFAULT 0,
    declared_task_id TEXT   NOT NULL DEFAULT '',
    declared_project TEXT   NOT NULL DEFAULT '',
    declared_owner  TEXT    NOT NULL DEFAULT '',
    first_time      INTEGER  NOT NULL,
    last_time       INTEGER  NOT NULL,
    equal_s         REAL    NOT NULL DEFAULT 0,
    util_s          REAL    NOT NULL DEFAULT 0,
    busy_equal_s    REAL    NOT NULL DEFAULT 0,
    busy_util_s     REAL    NOT NULL DEFAULT 0,
    energy_j        REAL    NOT NULL DEFAULT 0,
    PRIMARY KEY (month, node, uuid, gpu_instance_id, user_key)
);
-- The facts of the hours already stored.
INSERT INTO node_gpu_days (day, node, uuid, model, observed_s, unallocated_s, energy_j)
    SELECT hour - hour % 86400, node, uuid, MAX(model), SUM(observed_s), SUM(unallocated_s), SUM(energy_j)
    FROM node_gpu_hours GROUP BY hour - hour % 86400, node, uuid;
INSERT INTO node_user_days (day, node, uuid, gpu_instance_id, user_key, model, profile, slices, total_slices, runtime, container_id, pod_uid, namespace, pod, container, slurm_job, uid, cgroup, declared, declared_task_id, declared_project, declared_owner, first_time, last_time, equal_s, util_s, busy_equal_s, busy_util_s, energy_j)
    SELECT hour - hour % 86400, node, uuid, gpu_instance_id, user_key, MAX(model), MAX(profile), MAX(slices), MAX(total_slices), MAX(runtime), MAX(container_id), MAX(pod_uid), MAX(namespace), MAX(pod), MAX(container), MAX(slurm_job), MAX(uid), MAX(cgroup), MAX(declared), MAX(declared_task_id), MAX(declared_project), MAX(declared_owner), MIN(last_time), MAX(last_time), SUM(equal_s), SUM(util_s), SUM(busy_equal_s), SUM(busy_util_s), SUM(energy_j)
    FROM node_user_hours GROUP BY hour - hour % 86400, node, uuid, gpu_instance_id, user_key;
INSERT INTO node_gpu_months (month, node, uuid, model, observed_s, unallocated_s, energy_j)
    SELECT CAST(strftime('%s', hour, 'unixepoch', 'start of month') AS INTEGER), node, uuid, MAX(model), SUM(observed_s), SUM(unallocated_s), SUM(energy_j)
    FROM node_gpu_hours GROUP BY CAST(strftime('%s', hour, 'unixepoch', 'start of month') AS INTEGER), node, uuid;
INSERT INTO node_user_months (month, node, uuid, gpu_instance_id, user_key, model, profile, slices, total_slices, runtime, container_id, pod_uid, namespace, pod, container, slurm_job, uid, cgroup, declared, declared_task_id, declared_project, declared_owner, first_time, last_time, equal_s, util_s, busy_equal_s, busy_util_s, energy_j)
    SELECT CAST(strftime('%s', hour, 'unixepoch', 'start of month') AS INTEGER), node, uuid, gpu_instance_id, user_key, MAX(model), MAX(profile), MAX(slices), MAX(total_slices), MAX(runtime), MAX(container_id), MAX(pod_uid), MAX(namespace), MAX(pod), MAX(container), MAX(slurm_job), MAX(uid), MAX(cgroup), MAX(declared), MAX(declared_task_id), MAX(declared_project), MAX(declared_owner), MIN(last_time), MAX(last_time), SUM(equal_s), SUM(util_s), SUM(busy_equal_s), SUM(busy_util_s), SUM(energy_j)
    FROM node_user_hours GROUP BY CAST(strftime('%s', hour, 'unixepoch', 'start of month') AS INTEGER), node, uuid, gpu_instance_id, user_key;

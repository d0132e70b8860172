-- The distinct (project, owner) pairs of the stored tasks, kept on every
-- registration: a token's scope is resolved against these few rows instead
-- of a scan of the tasks' index at every scoped read.
CREATE TABLE project_owners (
    project TEXT NOT NULL,
    owner   TEXT NOT NULL,
    PRIMARY KEY (project, owner)
);
INSERT INTO project_owners (project, owner) SELECT DISTINCT project, owner FROM tasks;

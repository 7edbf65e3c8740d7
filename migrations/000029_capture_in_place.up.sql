-- pgsketch catalog, version 29: the view capture_in_place, which answers
-- the capture check of every answering statement in plain SQL where it
-- passes. sql/capture_view_v1.sql, included below.

\ir ../sql/capture_view_v1.sql

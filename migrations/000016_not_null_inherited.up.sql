-- pgsketch catalog, version 16: pgsketch.catalog() counts a source column
-- as NOT NULL only when every table inheriting from the source declares
-- it too. sql/catalog_v8.sql, included below.

\ir ../sql/catalog_v8.sql

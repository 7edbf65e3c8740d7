-- Removes version 5. It leaves the sketch columns' storage as it is: which
-- of them version 5 changed is not recorded, external storage changes no
-- result, and version 4 (to which this returns) sets it on new rollups.
SELECT 1;

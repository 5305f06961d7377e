"""Publishers built on the drain loop; each module holds one Publisher and its Source."""
